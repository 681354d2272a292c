"""A long run stores each result once: what a suspension appends does not grow with the
run (bench/long_run.py measures the time; this pins the bytes, which are exact)."""

from __future__ import annotations

from bench import long_run


def test_bytes_per_suspension_do_not_grow_with_the_run(db_url: str) -> None:
    measured = long_run.run(db_url, 200)
    assert measured["events"] == 2 * 200 + 2  # started, 200 x (waiting, resumed), completed
    # Suspension 190 appends what suspension 10 did (item numbers grow by a digit).
    assert measured["bytes_per_suspension_ratio_1000_vs_10"] <= 1.02
