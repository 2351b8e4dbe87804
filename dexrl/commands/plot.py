"""``dexrl plot``: learning curves of one or more runs as one PNG."""

from __future__ import annotations

from pathlib import Path

import typer

from dexrl.console import print_json
from dexrl.errors import disk_full, disk_full_error, disk_full_folder

EPILOG = """\
Examples:

  dexrl plot runs/reach_pi0_20261123-153000
      Writes runs/reach_pi0_20261123-153000/curves.png: success, return, policy and value
      loss, approx KL, clip fraction, grad norm and the time split per global step.

  dexrl plot runs/seed0 runs/seed1 runs/seed2 --out seeds.png
      The three runs overlaid, one colour each, with a legend.

  dexrl plot runs
      Not a run folder but holds some: every run folder directly under runs/ overlaid, into
      runs/curves.png (runs with nothing logged yet are skipped, and named).

  dexrl plot runs/seed0 runs/seed1 --out seeds.png --json | jq -r .png
      The same PNG; the path and the runs drawn as one JSON document (schema dexrl.plot/1).
"""

SCHEMA = "dexrl.plot/1"


def plot(
    run_dirs: list[Path] = typer.Argument(..., help="Run folders (RUN_DIR with tensorboard/), "
                                          "or a folder holding run folders (runs/)."),
    out: Path = typer.Option(None, "--out", "-o",
                             help="PNG to write (default PATH/curves.png for one PATH given; "
                                  "./curves.png for several)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document (schema "
                                 f"{SCHEMA}) instead of text."),
) -> None:
    """Draw runs' learning curves (success, return, losses, KL, time split) as one PNG."""
    from dexrl.curves import RunCurves, plot_runs

    notes: list[str] = []
    drawn: list[RunCurves] = []
    try:
        path = plot_runs(list(run_dirs), out, note=notes.append if as_json else typer.echo,
                         drawn=drawn)
    except OSError as exc:
        if not disk_full(exc):
            raise
        raise disk_full_error(disk_full_folder(exc, Path.cwd()), hint="free space on that "
                              "disk, or pass --out FILE.png on a larger one") from None
    if as_json:
        print_json(SCHEMA, png=path, notes=notes, runs=[
            {"label": run.label, "run_dir": run.run_dir,
             "last_step": max((steps[-1] for steps, _ in run.series.values() if steps),
                              default=0)} for run in drawn])
        return
    typer.echo(f"curves: {path}")


def mount(app: typer.Typer) -> None:
    """Add the verb to the app."""
    app.command("plot", epilog=EPILOG)(plot)
