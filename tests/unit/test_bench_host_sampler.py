"""The wakeup benchmark's host sampler: its arithmetic on /proc counters, and what it
sets against the slowest waits."""

from __future__ import annotations

from bench.common import HostSampler


def _sampler(samples: list[tuple[float, int, int, int]]) -> HostSampler:
    sampler = HostSampler(interval=0.1)
    sampler.samples = samples
    return sampler


def test_steal_and_pressure_are_shares_of_each_interval() -> None:
    # 0.1 s apart: 20 jiffies of which 5 stolen, then 20 of which none; CPU pressure
    # 50,000 µs in the first 0.1 s (50%), 10,000 µs in the second (10%).
    sampler = _sampler([(10.0, 1000, 100, 0), (10.1, 1020, 105, 50_000), (10.2, 1040, 105, 60_000)])

    assert [(round(w[2], 1), round(w[3], 1)) for w in sampler.windows()] == [
        (25.0, 50.0),
        (0.0, 10.0),
    ]


def test_the_slow_waits_count_only_the_intervals_they_overlap() -> None:
    sampler = _sampler([(10.0, 1000, 100, 0), (10.1, 1020, 105, 50_000), (10.2, 1040, 105, 60_000)])

    report = sampler.report(slow=[(10.15, 10.18)])

    assert report["slow_intervals"] == 1
    assert (report["steal_pct_in_slow"], report["cpu_pressure_pct_in_slow"]) == (0.0, 10.0)
    assert (report["steal_pct"], report["steal_pct_max_interval"]) == (12.5, 25.0)
    assert report["cpu_pressure_pct_max_interval"] == 50.0


def test_a_live_sampler_reads_this_host() -> None:
    with HostSampler(interval=0.01) as sampler:
        while len(sampler.samples) < 3:
            pass
    report = sampler.report()
    assert len(sampler.samples) >= 4  # the one taken at exit too
    assert 0.0 <= report["steal_pct"] <= 100.0 and report["slow_intervals"] == 0
