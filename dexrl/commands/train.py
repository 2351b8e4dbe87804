"""``dexrl train``: compose, validate, register the models and hand the run to RLinf."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from dexrl.training.session import (
    LaunchOptions,
    NewRun,
    TrainRequest,
    launch_plan,
    prepare,
    refuse_on_errors,
    run,
    start,
)

EPILOG = """\
Examples:

  dexrl train --suite libero_spatial --model pi0 --smoke
      The real RLinf pipeline on the CPU: a tiny random π0, one LIBERO env, one PPO step and a
      checkpoint in runs/libero_spatial_pi0_<time>/ (about 2 minutes on 2 cores).

  dexrl train --suite libero_spatial --model pi0 --ckpt Dexmal/libero-db-pi0
      Full PPO on this node's GPUs (the repo id must have been fetched by `dexrl download`).

  dexrl train --suite libero_spatial --model pi0 --ckpt /data/libero-db-pi0 --dry-run
      Prints placement, per-step work, checkpoint size and a memory estimate; starts nothing.

  dexrl train --suite libero_10 --model pi0 --ray-address 10.0.0.1:6379 cluster.num_nodes=2
      Attach to a Ray cluster started on every node with RLINF_NODE_RANK set (see
      docs/multi-node.md).
"""


def train(
    suite: str = typer.Option(None, "--suite", "-s", help="LIBERO suite, e.g. libero_spatial."),
    model: str = typer.Option(None, "--model", "-m",
                              help="Policy: pi0, dm0 or a plugin's (`dexrl configs` lists them)."),
    config_name: str = typer.Option(None, "--config-name", "-c", help="A shipped config name."),
    ckpt: str = typer.Option(None, "--ckpt", help="Checkpoint dir or downloaded repo id."),
    name: str = typer.Option(None, "--name", help="Run name (default <suite>_<model>_<time>)."),
    run_dir: Path = typer.Option(None, "--run-dir", help="Run directory (default runs/<name>)."),
    ray_address: str = typer.Option(None, "--ray-address", envvar="RAY_ADDRESS",
                                    help="Attach to this Ray cluster instead of a private one."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan; start nothing."),
    smoke: bool = typer.Option(False, "--smoke",
                               help="Tiny random model, one env, one step: runs on a CPU."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show worker logs too."),
    gpus_per_node: int = typer.Option(None, "--gpus-per-node", min=1,
                                      help="GPUs per node (default: this node's, else 8)."),
    stall_timeout: float = typer.Option(1800.0, "--stall-timeout", min=1,
                                        help="Seconds without progress before giving up."),
    overrides: list[str] = typer.Argument(None, help="Hydra overrides, key=value."),
) -> None:
    """Train a policy with PPO on LIBERO, RLinf as the backend."""
    new = prepare(TrainRequest(
        suite=suite, model=model, config_name=config_name, ckpt=ckpt, name=name,
        run_dir=run_dir, smoke=smoke, dry_run=dry_run, gpus_per_node=gpus_per_node,
        overrides=tuple(overrides or ()),
        launch=LaunchOptions(ray_address=ray_address, verbose=verbose,
                             stall_timeout=stall_timeout)))
    if dry_run:
        show_plan(new)
        return
    raise typer.Exit(run(start(new)))


def show_plan(new: NewRun) -> None:
    """Print what a launch would do (``--dry-run``); nothing is started or written."""
    from dexrl.console import console
    from dexrl.runs.owned_keys import render_settings
    from dexrl.training.plan import render_plan

    result, findings, per_node = new.result, new.findings, new.per_node
    target, settings = new.target, new.settings
    refuse_on_errors(result.name, findings)
    out = console()
    out.print(f"Plan for {result.name} ({per_node} GPU(s) per node assumed):", markup=False)
    for line in render_plan(launch_plan(new), per_node):
        out.print(line, markup=False)
    for f in findings:
        out.print(f"warning: {f.render()}", markup=False)
    command = [a for a in sys.argv if a != "--dry-run"]
    out.print(f"Run directory: {target}", markup=False)
    out.print("Run-folder settings (dexrl sets these, in config.yaml too):", markup=False)
    for line in render_settings(settings):
        out.print(f"  {line}", markup=False)
    out.print(f"Launch command: {' '.join(command)}", markup=False)


def mount(app: typer.Typer) -> None:
    """Add the verb to the app."""
    app.command("train", epilog=EPILOG)(train)
