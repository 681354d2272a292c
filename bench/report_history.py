"""The full runs' history: every full run's headline figures (bench/full_runs.json),
grouped into sets of runs made one after the other on one tree, and the report's
tables of them (a claim needs consecutive runs; the history keeps every set, not only
the last three runs that bench/results.json carries)."""

from __future__ import annotations

import json
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

from .report_format import fmt, meets
from .report_format import table as _table

HISTORY = Path(__file__).with_name("full_runs.json")

# The longest pause between one full run's end and the next one's start for the two to
# count as one after the other (a look at the results, a commit in between).
BACK_TO_BACK_GAP_S = 15 * 60

# A run's duration where its headline kept none (runs before 2026-12-04): twice the
# full run's 15-minute bound.
UNRECORDED_DURATION_S = 30 * 60

# The targets of the third benchmark round, as the history's tables name them: our
# ratios to the peers measured in the same run, and our own figures.
PEER_RATIOS = {
    "sleep_workflow.ratio_vs_dbos": "sleep / DBOS",
    "sleep_workflow.ratio_vs_absurd": "sleep / Absurd",
    "event_wait.ratio_vs_absurd": "event wait / Absurd",
    "event_wait.ratio_vs_dbos": "event wait / DBOS",
    "fan_out.ratio_vs_absurd": "fan-out / Absurd",
}
OWN_FIGURES = {
    "backlog_drain.fraction_of_commit_rate": "drain / commit rate",
    "wakeup.p99_ms": "wakeup p99 ms",
    "timers.lateness_p99_s": "timer p99 s",
}
HISTORY_KEYS = {**PEER_RATIOS, **OWN_FIGURES}

# How many runs of one set make a claim (the benchmark issues' "three consecutive full
# runs"), and in how many of them a target must be met.
SET_SIZE = 3
MET_IN = 2


def headline(results: dict[str, Any]) -> dict[str, Any]:
    """A run's time, load and targeted figures (what the report compares across runs)."""
    return {
        "generated_at": results.get("generated_at"),
        "git_commit": results.get("versions", {}).get("git_commit"),
        "load_average_at_start": results.get("machine", {}).get("load_average_at_start"),
        "duration_s": results.get("duration_s"),
        "commit_rate_one_connection": results.get("backlog_drain", {})
        .get("commit_rate_one_connection", {})
        .get("commits_per_s"),
        **{key: t["value"] for key, t in results.get("targets", {}).items()},
    }


def back_to_back(runs: list[dict[str, Any]]) -> bool:
    """Whether each run started within BACK_TO_BACK_GAP_S of the end of the one before
    (a pair whose start times cannot be read counts as one after the other)."""
    for before, after in pairwise(runs):
        try:
            began = datetime.fromisoformat(str(before.get("generated_at")))
            then = datetime.fromisoformat(str(after.get("generated_at")))
        except ValueError:
            continue
        duration = float(before.get("duration_s") or UNRECORDED_DURATION_S)
        if (then - began).total_seconds() > duration + BACK_TO_BACK_GAP_S:
            return False
    return True


def no_claim(run: dict[str, Any], key: str) -> str | None:
    """Why a run's figure for `key` is no claim (its `no_claim` map, written by hand
    when a run is read afterwards: the peer's best shape did not run, say), or None."""
    reason: str | None = run.get("no_claim", {}).get(key)
    return reason


def no_claim_label(run: dict[str, Any], key: str) -> str | None:
    """A run's figure for `key` as the tables show it when it is no claim ("9 (no
    claim)"), or None when it is a claim."""
    return f"{fmt(run[key])} (no claim)" if no_claim(run, key) else None


def met_in(runs: list[dict[str, Any]], key: str, target: str) -> tuple[int, int]:
    """In how many of the runs that measured `key` its figure meets `target`, and how
    many measured it (a figure that is no claim counts as not measured)."""
    verdicts = [None if no_claim(run, key) else meets(run.get(key), target) for run in runs]
    measured = [v for v in verdicts if v is not None]
    return sum(measured), len(measured)


def load_history(path: Path = HISTORY) -> list[dict[str, Any]]:
    """The headlines of every full run recorded so far, oldest first."""
    if not path.exists():
        return []
    runs: list[dict[str, Any]] = json.loads(path.read_text())
    return runs


def latest_full_runs(keep: int = 2, path: Path = HISTORY) -> list[dict[str, Any]]:
    """The headlines of the last `keep` full runs recorded, newest first: before a run
    is recorded, the runs its report's table of consecutive runs sets beside it."""
    return load_history(path)[::-1][:keep]


def record_full_run(results: dict[str, Any], path: Path = HISTORY) -> list[dict[str, Any]]:
    """Add this full run's headline to the history (once: a run already there by its
    start time is not added again) and return the history."""
    runs = load_history(path)
    entry = headline(results)
    if all(run.get("generated_at") != entry["generated_at"] for run in runs):
        runs.append(entry)
        runs.sort(key=lambda run: str(run.get("generated_at")))
        path.write_text(json.dumps(runs, indent=1) + "\n")
    return runs


def sets_of_runs(runs: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The runs (oldest first) in sets: a run joins the set before it when it ran the
    same recorded tree and started within the pause after that set's last run."""
    sets: list[list[dict[str, Any]]] = []
    for run in runs:
        last = sets[-1][-1] if sets else None
        if (
            last is not None
            and run.get("git_commit")
            and run.get("git_commit") == last.get("git_commit")
            and back_to_back([last, run])
        ):
            sets[-1].append(run)
        else:
            sets.append([run])
    return sets


def _figure(run: dict[str, Any], key: str, target: str) -> str:
    """A run's figure for `key`, in bold when it misses `target` ("-": not measured; a
    figure that is no claim says so and is judged as not measured)."""
    if key not in run:
        return "-"
    if label := no_claim_label(run, key):
        return label
    return fmt(run[key]) if meets(run[key], target) is not False else f"**{fmt(run[key])}**"


def _missed(runs: list[dict[str, Any]], keys: list[str], targets: dict[str, str]) -> str:
    """What no SET_SIZE consecutive runs of the set met in MET_IN of them; a set of
    fewer runs is no claim."""
    if len(runs) < SET_SIZE:
        return f"(no claim: {len(runs)} run{'s' if len(runs) > 1 else ''})"
    windows = [runs[i : i + SET_SIZE] for i in range(len(runs) - SET_SIZE + 1)]
    missed = [
        HISTORY_KEYS[key]
        for key in keys
        if all(met_in(window, key, targets[key])[0] < MET_IN for window in windows)
    ]
    return ", ".join(missed) if missed else "none"


def history_section(history: list[dict[str, Any]], targets: dict[str, Any]) -> list[str]:
    """Every set of full runs that measured all of the round's targets, oldest first,
    each judged by today's targets (`targets`: the results' "targets")."""
    keys = [key for key in HISTORY_KEYS if key in targets]
    bars = {key: str(targets[key]["target"]) for key in keys}
    sets = [
        runs for runs in sets_of_runs(history) if any(all(k in run for k in keys) for run in runs)
    ]
    if not keys or not sets:
        return []
    claims = [
        [
            runs[0].get("git_commit") or "not recorded",
            str(runs[0].get("generated_at", ""))[:16].replace("T", " "),
            len(runs),
            _missed(runs, keys, bars),
        ]
        for runs in sets
    ]

    def figures(shown: list[str], host: bool = False) -> list[str]:
        """A row a run: its tree, its start and its figures for `shown` (`host`: and the
        server's one-connection commit rate in that run, the host's speed)."""
        return _table(
            [
                "tree",
                "started (UTC)",
                *[f"{HISTORY_KEYS[key]} ({bars[key]})" for key in shown],
                *(["host: commits/s, 1 connection"] if host else []),
            ],
            [
                [
                    run.get("git_commit") or "not recorded",
                    str(run.get("generated_at", ""))[5:16].replace("T", " "),
                    *[_figure(run, key, bars[key]) for key in shown],
                    *([fmt(run.get("commit_rate_one_connection") or "-")] if host else []),
                ]
                for runs in sets
                for run in runs
            ],
        )

    return [
        "",
        "## History of full runs",
        "",
        "Every full run `make bench` has recorded since all of the round's targets were",
        "measured (`bench/full_runs.json`, one headline a run, every target's figure in",
        "it), in sets: runs made one after the other on one tree. The trees are commits",
        "of this repository; between sets the machine changed once (2026-12-05 from",
        "15:05, a new machine of the same kind, whole full runs 12-14% shorter) and its",
        "load from hour to hour, so compare sets by their ratios to the peers measured",
        "in the same run, not by raw rates. Every set is judged by today's targets,",
        "which were lower before the third round.",
        "",
        f"A set of {SET_SIZE} is a claim when a target is met in {MET_IN} of them; what",
        "each set missed:",
        "",
        *_table(["tree", "started (UTC)", "runs", f"missed (met in fewer than {MET_IN})"], claims),
        "",
        "Each run's ratios to the peers and its own figures (bold: misses today's",
        "target; no claim: a figure read afterwards as not comparable, counted in no",
        "set, its reason in `bench/full_runs.json`; the start is month-day and time).",
        "Beside our own figures, the host's speed in that run: the server's commit rate",
        "on one connection (the drain's reference: 4,502-5,076/s in every run of",
        "2026-12-05 from 15:05; '-' where the run's results were not kept):",
        "",
        *figures([key for key in keys if key in PEER_RATIOS]),
        "",
        *figures([key for key in keys if key in OWN_FIGURES], host=True),
    ]
