"""``dexrl resume``: continue a run from its latest complete checkpoint, same config; a run with
no complete checkpoint yet starts again from step 0."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import typer

from dexrl.bridge.launch.spec import LaunchOptions
from dexrl.checkpoints.files.guard import MOVE_ASIDE_FLAG, would_move_notes
from dexrl.commands import options
from dexrl.console import console, print_json
from dexrl.training.session import (
    ResumeRequest,
    prepare_resume,
    run,
    start_resume,
)

EPILOG = """\
Examples:

  dexrl resume runs/libero_spatial_pi0_20261122-101500
      Continues from the latest complete checkpoints/global_step_N with the run's saved config.

  dexrl resume runs/my_run runner.max_steps=600
      Extends the run; run length, checkpoint cadence, logging and placement may change freely.

  dexrl resume runs/my_run runner.max_steps=600 --dry-run
      Which checkpoint it would continue from, the steps left and every config change (also the
      ones dexrl makes, e.g. runner.resume_dir); starts and writes nothing.

  dexrl resume runs/my_run --step 100 actor.optim.lr=1e-6 --allow-changes
      Other changes alter the experiment: they are refused with a diff unless --allow-changes.

  dexrl resume runs/stopped_early
      A run stopped (Ctrl-C, a failure) before its first complete checkpoint starts again from
      step 0 in its folder, with its saved config.

  dexrl resume runs/my_run --step 100 --move-aside
      Checkpoint folders after step 100, or without a valid completion marker (a killed
      driver's cut-short save), are refused until moved: --move-aside moves them into
      runs/my_run/set-aside/<time>/ (nothing is deleted) and continues.

  dexrl resume runs/my_run runner.max_steps=600 --dry-run --json | jq .config_changes
      The dry run as one JSON document (schema dexrl.resume-plan/1); --json needs --dry-run.
"""

PLAN_SCHEMA = "dexrl.resume-plan/1"  # `--dry-run --json`


def resume(
    run_dir: Path = typer.Argument(..., help="The run folder `dexrl train` created."),
    step: int = typer.Option(None, "--step", min=0, help="Resume from this checkpoint step."),
    allow_changes: bool = typer.Option(False, "--allow-changes",
                                       help="Accept overrides that change the experiment."),
    move_aside: bool = typer.Option(False, MOVE_ASIDE_FLAG, help="Move the checkpoint folders "
                                    "the run would write over or pass over (later steps, "
                                    "incomplete ones) into RUN_DIR/set-aside/<time>/ first; "
                                    "nothing is deleted."),
    ray_address: str = options.ray_address(),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what would continue, from which "
                                 "step, with which config changes; start and write nothing."),
    verbose: bool = options.verbose(),
    stall_timeout: float = options.stall_timeout(),
    max_restarts: int = options.max_restarts(),
    overrides: list[str] = typer.Argument(None, help="Overrides, key=value (see --help)."),
    as_json: bool = typer.Option(False, "--json", help="With --dry-run: print one JSON document "
                                 f"(schema {PLAN_SCHEMA}) instead of text."),
) -> None:
    """Continue a run from its latest complete checkpoint (or --step N).

    A run with no complete checkpoint yet starts again from step 0, in its folder.
    """
    from dexrl.config.resume_rules import config_diff, diff_lines

    options.refuse_json_without_dry_run(as_json, dry_run, progress="a resumed run's progress",
                                        as_data="what would continue")
    resumption = prepare_resume(ResumeRequest(
        run_dir, step=step, allow_changes=allow_changes, overrides=tuple(overrides or ()),
        move_aside=move_aside, launch=LaunchOptions(ray_address=ray_address, verbose=verbose,
                             stall_timeout=stall_timeout, max_restarts=max_restarts)))
    checkpoint, out = resumption.checkpoint, console()
    steps = f"steps {resumption.from_step + 1} to {resumption.total} of {resumption.total}"
    if dry_run:
        resumption.notes += would_move_notes(resumption.in_the_way)
        diff = config_diff(resumption.old, resumption.new)
        if as_json:
            print_json(PLAN_SCHEMA, run_dir=resumption.dir,
                       checkpoint=None if checkpoint is None else {"step": checkpoint.step,
                                                                   "path": checkpoint.path},
                       restart=checkpoint is None, from_step=resumption.from_step,
                       to_step=resumption.total, notes=resumption.notes,
                       config_changes=change_records(diff, resumption.owned))
            return
        what = (f"Would resume {resumption.dir} from {checkpoint.path.name}: {steps}."
                if checkpoint is not None else
                f"Would start {resumption.dir} again from step 0: {steps}; it has no complete "
                "checkpoint yet.")
        out.print(f"{what} Nothing was started or written.", markup=False)
        changes = diff_lines(diff, resumption.owned)
        header = "Config changes:" if changes else "Config changes: none"
        for line in [*resumption.notes, header, *(f"  {d}" for d in changes)]:
            out.print(line, markup=False)
        return
    ready = start_resume(resumption)
    out.print(f"Resuming {resumption.dir} from {checkpoint.path.name}" if checkpoint is not None
              else f"Starting {resumption.dir} again from step 0: it has no complete checkpoint "
              "yet", markup=False)
    for line in resumption.notes:
        out.print(line, markup=False)
    raise typer.Exit(run(ready))


def change_records(diff: list[tuple[str, Any, Any]], owned: Iterable[str]) -> list[dict[str, Any]]:
    """The config changes of ``--dry-run --json``, one record per line ``diff_lines`` prints:
    ``old``/``new`` are null for a key one side lacks (``change`` says which)."""
    from dexrl.config.resume_rules import ABSENT

    owned = set(owned)
    return [{"key": key, "old": None if old is ABSENT else old,
             "new": None if new is ABSENT else new,
             "change": "added" if old is ABSENT else "removed" if new is ABSENT else "changed",
             "set_by_dexrl": key in owned} for key, old, new in diff]


def mount(app: typer.Typer) -> None:
    """Add the verb to the app."""
    app.command("resume", epilog=EPILOG)(resume)
