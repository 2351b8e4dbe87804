"""``dexrl verify``: check every checkpoint of a run folder against its completion marker."""

from __future__ import annotations

from pathlib import Path

import typer

from dexrl.checkpoints.files.guard import MOVE_ASIDE_FLAG, Verdict, verify_run
from dexrl.console import console, print_json
from dexrl.errors import DexrlError
from dexrl.runs.layout import CONFIG_FILE, checkpoints_dir

EPILOG = """\
Examples:

  dexrl verify runs/reach_pi0_20261123-153000
      One line per checkpoints/global_step_N: ok (every file's size and xxh3_64 checksum match
      its completion marker), damaged (naming the file), incomplete (why), or unlisted (marked
      by a dexrl that recorded no files); then the last good step and the command that resumes
      from it. Exit 1 when a checkpoint is damaged or incomplete.

  dexrl verify runs/my_run --sizes-only
      Sizes only: a stat per file, no byte read (what resume checks before a large step).

  dexrl verify runs/my_run --json | jq '.checkpoints[] | select(.status != "ok")'
      One JSON document (schema dexrl.verify/1).
"""

SCHEMA = "dexrl.verify/1"
BAD = ("damaged", "incomplete")


def verify(
    run_dir: Path = typer.Argument(..., help="The run folder `dexrl train` created."),
    sizes_only: bool = typer.Option(False, "--sizes-only", help="Check file sizes only, not "
                                    "checksums (reads no file)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document (schema "
                                 f"{SCHEMA}) instead of text."),
) -> None:
    """Check a run's checkpoints: each file's size and checksum against its marker."""
    if not (run_dir / CONFIG_FILE).is_file() and not checkpoints_dir(run_dir).is_dir():
        raise DexrlError(f"not a run folder (no {CONFIG_FILE}, no checkpoints/)",
                         "give the folder `dexrl train` created", where=str(run_dir),
                         code="verify-not-a-run-folder")
    verdicts = verify_run(run_dir, checksums=not sizes_only)
    good = [v for v in verdicts if v.status not in BAD]
    go_on = resume_command(run_dir, verdicts)
    if as_json:
        print_json(SCHEMA, run_dir=run_dir, checksums=not sizes_only,
                   last_good=good[-1].checkpoint.step if good else None, resume=go_on,
                   checkpoints=[{"step": v.checkpoint.step, "path": v.checkpoint.path,
                                 "status": v.status, "detail": v.detail} for v in verdicts])
    else:
        out = console()
        out.print(f"{run_dir}: {len(verdicts)} checkpoint folder(s)", markup=False)
        width = max((len(v.checkpoint.path.name) for v in verdicts), default=0)
        for v in verdicts:
            out.print(f"  {v.checkpoint.path.name:<{width}}  {v.status:<10}  {v.detail}",
                      markup=False)
        out.print(f"Last good checkpoint: {good[-1].checkpoint.path.name}; `{go_on}` continues "
                  "from it." if good else "No good checkpoint.", markup=False)
    if any(v.status in BAD for v in verdicts):
        raise typer.Exit(1)


def resume_command(run_dir: Path, verdicts: list[Verdict]) -> str | None:
    """The command that resumes from the last good checkpoint (None without one)."""
    good = [v for v in verdicts if v.status not in BAD]
    if not good:
        return None
    if good[-1] is verdicts[-1]:
        return f"dexrl resume {run_dir}"
    return f"dexrl resume {run_dir} --step {good[-1].checkpoint.step} {MOVE_ASIDE_FLAG}"


def mount(app: typer.Typer) -> None:
    """Add the verb to the app."""
    app.command("verify", epilog=EPILOG)(verify)
