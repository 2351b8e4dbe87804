"""``dexrl plot``: learning curves of one or more runs as one PNG."""

from __future__ import annotations

from pathlib import Path

import typer

EPILOG = """\
Examples:

  dexrl plot runs/reach_pi0_20261123-153000
      Writes runs/reach_pi0_20261123-153000/curves.png: success, return, policy and value
      loss, approx KL, clip fraction, grad norm and the time split per global step.

  dexrl plot runs/seed0 runs/seed1 runs/seed2 --out seeds.png
      The three runs overlaid, one colour each, with a legend.
"""


def plot(
    run_dirs: list[Path] = typer.Argument(..., help="Run folders (RUN_DIR with tensorboard/)."),
    out: Path = typer.Option(None, "--out", "-o",
                             help="PNG to write (default RUN_DIR/curves.png; ./curves.png "
                                  "for several runs)."),
) -> None:
    """Draw runs' learning curves (success, return, losses, KL, time split) as one PNG."""
    from dexrl.curves import plot_runs
    from dexrl.errors import disk_full, disk_full_error, disk_full_folder

    try:
        path = plot_runs(list(run_dirs), out)
    except OSError as exc:
        if not disk_full(exc):
            raise
        raise disk_full_error(disk_full_folder(exc, Path.cwd()), hint="free space on that "
                              "disk, or pass --out FILE.png on a larger one") from None
    typer.echo(f"curves: {path}")


def mount(app: typer.Typer) -> None:
    """Add the verb to the app."""
    app.command("plot", epilog=EPILOG)(plot)
