"""Before a run folder's checkpoint is used or written past: its files checked against its
marker (a damaged step is refused before any worker starts), and the checkpoint folders a resume
would write over or pass over (refused, or moved aside on request; nothing is deleted).

Design notes: docs/design/run-folders.md.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dexrl.checkpoints.files.proof import (
    CHEAP_CHECKSUM_BYTES,
    HASH,
    Damage,
    find_damage,
    total_bytes,
)
from dexrl.checkpoints.files.steps import Checkpoint, list_checkpoints
from dexrl.errors import DexrlError
from dexrl.runs.durable import sync_dir
from dexrl.runs.layout import SET_ASIDE, checkpoints_dir, set_aside_dir

MOVE_ASIDE_FLAG = "--move-aside"  # resume's flag: move the folders in its way, then continue


def cheap(checkpoint: Checkpoint) -> bool:
    """Whether reading every byte of ``checkpoint`` before using it is cheap enough."""
    return checkpoint.files is not None and total_bytes(checkpoint.files) <= CHEAP_CHECKSUM_BYTES


def damage(checkpoint: Checkpoint, *, checksums: bool | None = None) -> Damage | None:
    """The first file of a complete ``checkpoint`` that differs from its marker's list (sizes
    always; checksums when ``checksums``, or where :func:`cheap` when it is None). None when all
    match, and for a marker without a file list (nothing to check against)."""
    if checkpoint.files is None:
        return None
    return find_damage(checkpoint.path, checkpoint.files,
                       checksums=cheap(checkpoint) if checksums is None else checksums)


def last_good(run_dir: Path, below: int) -> Checkpoint | None:
    """The latest complete checkpoint before step ``below`` whose files match its marker."""
    earlier = [c for c in list_checkpoints(run_dir) if c.complete and c.step < below]
    return next((c for c in reversed(earlier) if damage(c) is None), None)


def check_intact(run_dir: Path, checkpoint: Checkpoint, use: Callable[[Checkpoint], str], *,
                 checksums: bool | None = None) -> list[str]:
    """Refuse a complete ``checkpoint`` whose files are not what its marker recorded.

    Args:
        run_dir: The run folder (where an earlier, good step is looked for).
        checkpoint: The complete step about to be used.
        use: The exact command that uses another step of the run (for the hint).
        checksums: As :func:`damage`.

    Returns:
        A note for a marker written before dexrl recorded files (nothing could be checked).

    Raises:
        DexrlError: ``checkpoint-damaged``, naming the file, the last good step and ``use`` of it.
    """
    found = damage(checkpoint, checksums=checksums)
    if found is None:
        return ([] if checkpoint.files is not None else
                [f"note: {checkpoint.path.name}'s completion marker predates file lists: its "
                 "files were not checked"])
    good = last_good(run_dir, checkpoint.step)
    hint = (f"the last good checkpoint is {good.path.name}: `{use(good)}`" if good is not None
            else "no earlier checkpoint of this run is good; restore the file from a copy, or "
            "train again")
    raise DexrlError(f"checkpoint {checkpoint.path.name} is damaged: {found.file} "
                     f"{found.problem}", hint, where=str(checkpoint.path / found.file),
                     code="checkpoint-damaged")


def in_the_way(run_dir: Path, from_step: int) -> list[Checkpoint]:
    """The checkpoint folders a run continued from ``from_step`` would write over or pass
    over: every one with a later step, complete or not."""
    return [c for c in list_checkpoints(run_dir) if c.step > from_step]


def describe(checkpoint: Checkpoint) -> str:
    """``global_step_N (why)``: what a checkpoint in the way is."""
    why = checkpoint.problem if not checkpoint.complete else "complete, after the chosen step"
    return f"{checkpoint.path.name} ({why})"


def check_the_way(run_dir: Path, from_step: int, *, move: bool, go_on: str) -> list[Checkpoint]:
    """The checkpoint folders in the way of a run continued from ``from_step``, to be moved
    aside (``move``: ``--move-aside``); refused otherwise.

    Args:
        run_dir: The run folder.
        from_step: The step the run continues from (0: it starts again).
        move: Whether the user asked for them to be moved aside.
        go_on: What the run does then, for the hint ("resumes from global_step_2").

    Raises:
        DexrlError: ``resume-checkpoints-in-the-way``, naming each folder and the choices.
    """
    found = in_the_way(run_dir, from_step)
    if not found or move:
        return found
    names = " ".join(str(c.path) for c in found)
    aside = Path(run_dir) / SET_ASIDE
    raise DexrlError(f"{len(found)} checkpoint folder(s) would be written over or passed over: "
                     + ", ".join(describe(c) for c in found),
                     f"nothing is overwritten without your word: move them aside yourself "
                     f"(`mkdir -p {aside} && mv {names} {aside}/`), or add {MOVE_ASIDE_FLAG}: "
                     f"dexrl moves them into {aside}/<time>/ (nothing is deleted) and {go_on}; "
                     f"`dexrl verify {run_dir}` checks them first",
                     where=str(checkpoints_dir(run_dir)), code="resume-checkpoints-in-the-way")


def move_aside(run_dir: Path, checkpoints: list[Checkpoint]) -> list[tuple[Checkpoint, Path]]:
    """Move ``checkpoints`` into a new ``set-aside/<time>/`` folder of the run (renames, on the
    same disk, so nothing is copied or deleted); returns each with where it went."""
    if not checkpoints:
        return []
    folder = set_aside_dir(run_dir)
    folder.mkdir(parents=True)
    moved = []
    for c in checkpoints:
        os.rename(c.path, folder / c.path.name)
        moved.append((c, folder / c.path.name))
    sync_dir(folder)
    sync_dir(checkpoints_dir(run_dir))
    return moved


def set_aside_unfinished(run_dir: Path, start_step: int) -> list[str]:
    """After a launch that began at ``start_step`` ended with its driver alive: move aside the
    checkpoint folders it left without a valid marker (a save cut short by Ctrl-C, SIGTERM or a
    failure, a step that was not clean), so that the next ``resume`` is not refused for them.

    A launch starts with no checkpoint folder past ``start_step`` (``resume`` refuses one), so
    every such folder is this launch's own.
    """
    unfinished = [c for c in in_the_way(run_dir, start_step) if not c.complete]
    try:
        moved = move_aside(run_dir, unfinished)
    except OSError as exc:  # must not mask how the launch ended; the next resume names them
        return [f"note: could not move {', '.join(c.path.name for c in unfinished)} aside "
                f"({exc.strerror or exc}); `dexrl resume {run_dir} --move-aside` will"]
    return [f"note: {c.path.name} was left without a completion marker ({c.problem}); moved to "
            f"{folder}" for c, folder in moved]


def moved_notes(moved: list[tuple[Checkpoint, Path]]) -> list[str]:
    """What ``--move-aside`` says it did."""
    return [f"note: moved {describe(c)} to {folder}" for c, folder in moved]


def would_move_notes(found: list[Checkpoint]) -> list[str]:
    """What ``--move-aside`` would do (``--dry-run``)."""
    return [f"note: {MOVE_ASIDE_FLAG} would move {describe(c)} into "
            f"{Path(c.path).parent.parent / SET_ASIDE}/" for c in found]


def check_resume(run_dir: Path, checkpoint: Checkpoint | None, *,
                 move: bool) -> tuple[list[str], list[Checkpoint]]:
    """Everything ``resume`` checks in a run folder before it writes anything or starts Ray:
    the chosen ``checkpoint``'s files (:func:`check_intact`) and the folders in its way
    (:func:`check_the_way`).

    Returns:
        Notes to print, and the folders ``--move-aside`` (``move``) is to move aside
        (:func:`move_aside`, once the resume writes).
    """
    def use(good: Checkpoint) -> str:
        return f"dexrl resume {run_dir} --step {good.step} {MOVE_ASIDE_FLAG}"

    notes = check_intact(run_dir, checkpoint, use) if checkpoint is not None else []
    go_on = (f"resumes from {checkpoint.path.name}" if checkpoint is not None
             else "starts the run again from step 0")
    found = check_the_way(run_dir, checkpoint.step if checkpoint is not None else 0,
                          move=move, go_on=go_on)
    return notes, found


@dataclass(frozen=True)
class Verdict:
    """What ``dexrl verify`` found for one checkpoint folder.

    Attributes:
        checkpoint: The folder.
        status: ``ok`` (its files match its marker), ``unlisted`` (complete, marked before dexrl
            recorded files: nothing to check), ``damaged`` or ``incomplete``.
        detail: The damage or why it is incomplete; the files checked for ``ok``.
    """

    checkpoint: Checkpoint
    status: str
    detail: str


def verify_run(run_dir: Path, *, checksums: bool = True) -> list[Verdict]:
    """Every checkpoint folder of a run checked against its marker (sizes, and ``checksums``)."""
    verdicts = []
    for c in list_checkpoints(run_dir):
        if not c.complete:
            verdicts.append(Verdict(c, "incomplete", c.problem or ""))
        elif c.files is None:
            verdicts.append(Verdict(c, "unlisted", "its marker predates file lists"))
        elif (found := damage(c, checksums=checksums)) is not None:
            verdicts.append(Verdict(c, "damaged", f"{found.file} {found.problem}"))
        else:
            what = f"sizes and {HASH} checksums" if checksums else "sizes"
            verdicts.append(Verdict(c, "ok", f"{len(c.files)} file(s), "
                                    f"{total_bytes(c.files)} bytes: {what} match"))
    return verdicts
