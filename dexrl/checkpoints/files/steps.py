"""RLinf's checkpoint folders of a run: which are complete (their marker vouches for them), which
one resume, eval and export use, and the marker written once RLinf's save returned (with every
file of the step, its size and checksum: :mod:`dexrl.checkpoints.files.proof`)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dexrl.checkpoints.files.proof import HASH, files_problem, inventory
from dexrl.errors import DexrlError
from dexrl.runs.durable import sync_tree, write_json
from dexrl.runs.layout import MARKER, checkpoint_step, checkpoints_dir


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint folder of a run.

    Attributes:
        step: N of ``global_step_N``.
        path: The folder.
        problem: Why it is incomplete (see :func:`marker_problem`); None when it is complete.
        files: The marker's file list (path in the step -> size and checksum); None for an
            incomplete step and for a marker written before dexrl recorded files.
    """

    step: int
    path: Path
    problem: str | None
    files: Mapping[str, Mapping[str, Any]] | None = None

    @property
    def complete(self) -> bool:
        """Fully written: its completion marker is valid and names its step."""
        return self.problem is None


def read_marker(checkpoint: Path) -> tuple[str | None, dict[str, Any] | None]:
    """The :data:`MARKER` of ``checkpoint`` (``.../global_step_N``): why it does not vouch for
    the folder (None when it does), and its file list (None without one).

    A marker vouches when it is a JSON object with ``step`` (an integer equal to the folder's N)
    and ``written`` (a time stamp), and, where it has ``files`` (every marker
    :func:`mark_complete` writes now), a well-formed list of them. Markers written before dexrl
    recorded files (only ``step`` and ``written``) still vouch, without a file list.
    """
    path = Path(checkpoint) / MARKER
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return f"interrupted save, no {MARKER}", None
    except (OSError, UnicodeDecodeError) as exc:
        return f"{MARKER} cannot be read: {exc}", None
    try:
        data = json.loads(text)
    except ValueError:
        return f"{MARKER} is " + ("empty" if not text.strip() else "not valid JSON"), None
    step = data.get("step") if isinstance(data, dict) else None
    if not isinstance(step, int) or isinstance(step, bool) \
            or not isinstance(data.get("written"), str):
        return f"{MARKER} lacks its fields (an integer step and a written time)", None
    if step != checkpoint_step(Path(checkpoint)):
        return f"{MARKER} names step {step}, not {checkpoint_step(Path(checkpoint))}", None
    if "files" not in data:
        return None, None
    problem = files_problem(data["files"]) if data.get("hash") == HASH \
        else f"its checksums are {data.get('hash')!r}, not {HASH}"
    if problem is not None:
        return f"{MARKER} is malformed: {problem}", None
    return None, data["files"]


def marker_problem(checkpoint: Path) -> str | None:
    """Why the :data:`MARKER` of ``checkpoint`` does not vouch for it (:func:`read_marker`);
    None when it vouches."""
    return read_marker(checkpoint)[0]


def is_complete(checkpoint: Path) -> bool:
    """Whether ``checkpoint`` (``.../global_step_N``) was fully written (:func:`marker_problem`)."""
    return marker_problem(checkpoint) is None


def list_checkpoints(run_dir: Path) -> list[Checkpoint]:
    """Every ``global_step_N`` folder of a run, by step."""
    root = checkpoints_dir(run_dir)
    found = []
    for p in root.glob("global_step_*") if root.is_dir() else []:
        step = checkpoint_step(p)
        if p.is_dir() and step is not None:
            found.append(checkpoint_at(p))
    return sorted(found, key=lambda c: c.step)


def checkpoint_at(folder: Path) -> Checkpoint:
    """The ``global_step_N`` folder ``folder``, its marker read."""
    return Checkpoint(checkpoint_step(Path(folder)) or 0, Path(folder), *read_marker(folder))


def pick_checkpoint(run_dir: Path, step: int | None = None,
                    purpose: str = "resume from") -> Checkpoint:
    """The latest complete checkpoint, or the one at ``step``; DexrlError otherwise.

    The one rule for resume, eval and export: an incomplete checkpoint (an interrupted save, a
    marker that does not vouch for it) is never used; :func:`skipped` names the ones passed over.
    """
    all_ckpts = list_checkpoints(run_dir)
    complete = [c for c in all_ckpts if c.complete]
    if step is not None:
        match = [c for c in all_ckpts if c.step == step]
        if not match:
            have = ", ".join(str(c.step) for c in complete) or "none"
            raise DexrlError(f"no checkpoint at step {step}",
                             f"complete checkpoints: {have}", where=str(run_dir),
                             code="checkpoint-step-not-found")
        if not match[0].complete:
            have = ", ".join(str(c.step) for c in complete) or "none"
            raise DexrlError(f"the checkpoint at step {step} is incomplete ({match[0].problem})",
                             f"use a complete step ({have}), or give the run folder without a "
                             "step to take the latest complete one", where=str(match[0].path),
                             code="checkpoint-incomplete")
        return match[0]
    if not complete:
        partial = f" ({len(all_ckpts)} incomplete)" if all_ckpts else ""
        raise DexrlError(f"no complete checkpoint to {purpose}{partial}",
                         "train first (`dexrl resume RUN_DIR` starts an interrupted run again); "
                         "a checkpoint is written every runner.save_interval steps and counts "
                         "only once it finished writing",
                         where=str(checkpoints_dir(run_dir)), details=skipped(run_dir),
                         code="checkpoint-none-complete")
    return complete[-1]


def last_complete(run_dir: Path | None) -> Checkpoint | None:
    """The complete checkpoint with the highest step, None when there is none (or no run)."""
    if run_dir is None:
        return None
    return next((c for c in reversed(list_checkpoints(run_dir)) if c.complete), None)


def last_complete_fact(run_dir: Path | None) -> str:
    """What a failure message says about where the run can go on from."""
    last = last_complete(run_dir)
    return (f"the last complete checkpoint is {last.path.name}" if last is not None
            else "no checkpoint of this run is complete")


def resume_point(run_dir: Path, step: int | None = None) -> Checkpoint | None:
    """What ``resume`` continues from: :func:`pick_checkpoint`, except that a run with no complete
    checkpoint and no ``step`` asked for gives None (it starts again from step 0).

    Only ``resume`` restarts a run this way; eval and export keep refusing such a run.
    """
    if step is None and last_complete(run_dir) is None:
        return None
    return pick_checkpoint(run_dir, step)


def skipped(run_dir: Path, chosen: Checkpoint | None = None, *,
            restart: bool = False) -> list[str]:
    """Notes on the incomplete checkpoints newer than ``chosen`` (passed over, never used), each
    with why; without ``chosen``, those newer than the latest complete one (``restart``: the run
    starts again from step 0, which the notes say)."""
    found = list_checkpoints(run_dir)
    last = chosen.step if chosen else max((c.step for c in found if c.complete), default=-1)
    using = (f"; using {chosen.path.name}" if chosen
             else "; passed over, starting again from step 0" if restart else "")
    return [f"note: {c.path.name} is incomplete ({c.problem}){using}"
            for c in found if not c.complete and c.step > last]


def mark_complete(checkpoint: Path, step: int) -> Path:
    """Vouch for a finished checkpoint folder: make it durable, then write the marker (last),
    listing every file of the step with its size and checksum.

    The checkpoint's files are fsynced first, so that after a power loss a marker never
    survives the files it vouches for. Reads every byte once (the supervisor calls it off the
    training thread).
    """
    sync_tree(checkpoint)
    return write_json(Path(checkpoint) / MARKER,
                      {"step": step, "written": time.strftime("%Y-%m-%dT%H:%M:%S"),
                       "hash": HASH, "files": inventory(checkpoint)})

