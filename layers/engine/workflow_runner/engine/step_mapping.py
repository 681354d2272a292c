"""Where a migration puts a waiting run: the places `wfr runs migrate --map FROM=TO` names.

A place names a step of a definition by its position, as a user types it: step indexes
from the top, separated by dots, and after the index of a branch the arm to go into.
`2` is top-level step 2, `3.0` step 0 inside step 3 (a retry's or a for_each's steps),
`4.true.1` step 1 of the on_true arm of step 4. A place never names a for_each item or
a retry attempt: those belong to each run, and come along with it.

`FROM=TO` moves every run that waits at FROM, or inside it, to TO: `--map 2=3` takes a
run waiting at step 2, and one waiting at item 5 of a for_each at step 2, to step 3 (at
item 5). FROM and TO are at the same depth: moving a run into or out of a container
would have to make up the container's state (its item, attempt or arm). Where several
FROMs match a run, the longest applies; a run that none matches keeps its own path.
Pure: no database, no definitions (the migration checks TO against the target).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import InvalidInput
from ..stream import Frame, Path

_ARMS = ("true", "false")


@dataclass(frozen=True)
class Place:
    """A step position: (index, arm) per level; the arm only for a branch entered."""

    frames: tuple[tuple[int, str | None], ...]

    def __str__(self) -> str:
        return ".".join(str(i) + (f".{arm}" if arm else "") for i, arm in self.frames)

    def matches(self, path: Path) -> bool:
        """Whether a run at `path` waits at this place or inside it."""
        if len(path) < len(self.frames):
            return False
        return all(
            frame.get("i") == index and (arm is None or frame.get("arm") == arm)
            for (index, arm), frame in zip(self.frames, path, strict=False)
        )


def parse_place(text: str) -> Place:
    """A place as typed: `2`, `3.0`, `4.true.1`.

    Raises:
        InvalidInput: not a place (the message says what is wrong).
    """
    frames: list[tuple[int, str | None]] = []
    for token in text.strip().split("."):
        if token.isdigit():
            frames.append((int(token), None))
        elif token in _ARMS and frames and frames[-1][1] is None:
            frames[-1] = (frames[-1][0], token)
        else:
            raise InvalidInput(
                f"{text!r} is not a step place: step indexes separated by dots, with "
                "`true` or `false` after a branch's index for its arm (2, 3.0, 4.true.1)"
            )
    return Place(tuple(frames))


@dataclass(frozen=True)
class StepMapping:
    """FROM → TO places a migration moves runs by (empty: every run keeps its path)."""

    moves: tuple[tuple[Place, Place], ...] = ()

    def entries(self) -> list[str]:
        """The mapping as typed (`2=3`), for reports and links."""
        return [f"{source}={target}" for source, target in self.moves]

    def target(self, path: Path) -> Path:
        """Where a run waiting at `path` goes: the longest FROM it is at or inside is
        replaced by its TO (item and attempt frames kept, arms as TO says or as they
        were), the rest of its path kept; else its own path."""
        found = [(s, t) for s, t in self.moves if s.matches(path)]
        if not found:
            return [dict(frame) for frame in path]
        source, target = max(found, key=lambda move: len(move[0].frames))
        moved: Path = []
        for (index, arm), frame in zip(target.frames, path, strict=False):
            new: Frame = {**frame, "i": index}
            if arm is not None:
                new["arm"] = arm
            moved.append(new)
        return moved + [dict(frame) for frame in path[len(source.frames) :]]


def parse_mapping(entries: Sequence[str]) -> StepMapping:
    """`FROM=TO` entries (`--map`, repeatable) as a mapping.

    Raises:
        InvalidInput: an entry is not `FROM=TO`, a place is malformed, FROM and TO are
            at different depths, or two entries map the same FROM.
    """
    moves: list[tuple[Place, Place]] = []
    for entry in entries:
        source_text, equals, target_text = entry.partition("=")
        if not equals:
            raise InvalidInput(f"--map {entry!r}: expected FROM=TO, e.g. 2=3 or 4.true.1=5.true.1")
        source, target = parse_place(source_text), parse_place(target_text)
        if len(source.frames) != len(target.frames):
            raise InvalidInput(
                f"--map {entry!r}: {source} and {target} are at different depths; a "
                "migration moves a run within its nesting, never into or out of a "
                "container (that would make up the container's item, attempt or arm)"
            )
        if any(known == source for known, _ in moves):
            raise InvalidInput(f"--map {entry!r}: {source} is mapped twice")
        moves.append((source, target))
    return StepMapping(tuple(moves))
