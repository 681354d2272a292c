"""The wakeup benchmark's host sampler: its arithmetic on /proc counters, and what it
sets against the slowest waits."""

from __future__ import annotations

from bench.common import HostSampler


def _sampler(samples: list[tuple[float, int, int, int, int]]) -> HostSampler:
    sampler = HostSampler(interval=0.1)
    sampler.samples = samples
    return sampler


# 0.1 s apart: 20 jiffies of which 5 stolen, then 20 of which none; CPU pressure
# 50,000 µs in the first 0.1 s (50%), 10,000 µs in the second (10%); I/O pressure
# 0 then 80,000 µs (0%, 80%).
_SAMPLES = [
    (10.0, 1000, 100, 0, 7),
    (10.1, 1020, 105, 50_000, 7),
    (10.2, 1040, 105, 60_000, 80_007),
]


def test_steal_and_pressure_are_shares_of_each_interval() -> None:
    sampler = _sampler(_SAMPLES)

    assert [(round(w[2], 1), round(w[3], 1), round(w[4], 1)) for w in sampler.windows()] == [
        (25.0, 50.0, 0.0),
        (0.0, 10.0, 80.0),
    ]


def test_the_slow_waits_count_only_the_intervals_they_overlap() -> None:
    sampler = _sampler(_SAMPLES)

    report = sampler.report(slow=[(10.15, 10.18)])

    assert report["slow_intervals"] == 1
    assert (report["steal_pct_in_slow"], report["cpu_pressure_pct_in_slow"]) == (0.0, 10.0)
    assert (report["steal_pct"], report["steal_pct_max_interval"]) == (12.5, 25.0)
    assert report["cpu_pressure_pct_max_interval"] == 50.0
    assert (report["io_pressure_pct"], report["io_pressure_pct_in_slow"]) == (40.0, 80.0)


def test_a_live_sampler_reads_this_host() -> None:
    with HostSampler(interval=0.01) as sampler:
        while len(sampler.samples) < 3:
            pass
    report = sampler.report()
    assert len(sampler.samples) >= 4  # the one taken at exit too
    assert 0.0 <= report["steal_pct"] <= 100.0 and report["slow_intervals"] == 0
