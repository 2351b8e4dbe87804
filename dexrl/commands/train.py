"""``dexrl train``: compose, validate, register the models and hand the run to RLinf."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from dexrl.catalog import smoke_overlay
from dexrl.checks import Finding, errors
from dexrl.errors import DexrlError
from dexrl.hub import resolve_ckpt
from dexrl.training import (
    check_ray_address,
    ckpt_overrides,
    gpu_count,
    refuse_on_errors,
    run,
    write_smoke_checkpoint,
)

if TYPE_CHECKING:
    from dexrl.config import Validated

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
      Attach to a Ray cluster started on every node with RLINF_NODE_RANK set (see README).
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
    from dexrl import runs, runstate
    from dexrl.checks.config import Facts, run_config_checks
    from dexrl.config import compose_and_check, suite_of

    overrides = list(overrides or [])
    runs.refuse_owned_overrides(overrides, "--run-dir DIR picks the run folder")
    if name and run_dir:
        raise DexrlError("--name and --run-dir both name the run folder",
                         "pass one: --name NAME (runs/NAME) or --run-dir PATH")
    if ckpt and smoke:
        raise DexrlError("--smoke trains a tiny random model and takes no --ckpt",
                         "drop --ckpt, or drop --smoke to train the checkpoint")
    if ckpt:
        overrides = ckpt_overrides(resolve_ckpt(ckpt)) + overrides
    overlay = smoke_overlay(suite, config_name) if smoke else None
    if overlay:
        overrides = [f"+smoke={overlay}", *overrides]
    gpus = 0 if dry_run or smoke else gpu_count()
    per_node = gpus_per_node or (1 if smoke else gpus or 8)
    result = compose_and_check(suite, model, config_name, overrides, per_node)
    suite_name = suite_of(result.cfg, suite) or "libero"
    label = model or str(result.cfg.actor.model.model_type).removeprefix("dexbotic_")
    target = (Path(run_dir) if run_dir else runs.default_run_dir(suite_name, label, name))
    target = Path(os.path.abspath(target.expanduser()))
    settings = runs.set_run_folder(result.cfg, target)
    findings = [f for f in result.findings if not (smoke and _is_smoke_path_warning(f))]
    if dry_run:
        show_plan(result, findings, suite_name, per_node, target, settings)
        return
    refuse_on_errors(result.name, findings)
    missing = [f for f in findings if _is_smoke_path_warning(f)]
    if missing:
        raise DexrlError(f"{missing[0].message}; nothing was started", missing[0].hint,
                         where=missing[0].where)
    if not smoke and gpus == 0 and not ray_address:
        raise DexrlError("no CUDA GPU on this machine for a GPU placement; nothing was started",
                         "try `dexrl train ... --smoke` for a CPU run, or run `dexrl doctor`")
    try:
        runs.check_new_run_dir(target)
    except DexrlError as exc:  # say what happened to a run that was killed there
        exc.details += runstate.story(target)
        raise
    check_ray_address(ray_address)
    cfg = result.cfg
    target.mkdir(parents=True, exist_ok=True)
    if smoke:
        path = write_smoke_checkpoint(target, str(cfg.actor.model.model_type))
        if path is not None:
            cfg = compose_and_check(suite, model, config_name,
                                    [*overrides, *ckpt_overrides(path)], per_node).cfg
            runs.set_run_folder(cfg, target)
    refuse_on_errors(result.name, errors(run_config_checks(cfg, Facts(suite_name, per_node))))
    cfg = runs.resolved(cfg)
    runs.write_run_files(target, cfg, sys.argv, {"smoke": smoke, "suite": suite_name})
    raise typer.Exit(run(cfg, target, smoke=smoke, resume_from=None, ray_address=ray_address,
                         verbose=verbose, stall_timeout=stall_timeout))


def _is_smoke_path_warning(finding: Finding) -> bool:
    """--smoke writes its own checkpoint, so a missing default path is expected."""
    return finding.where == "actor.model.model_path" and finding.level == "warning"


def show_plan(result: Validated, findings: list[Finding], suite: str, per_node: int,
              target: Path, settings: dict[str, object]) -> None:
    """Print what a launch would do (``--dry-run``); nothing is started or written."""
    from dexrl import runs
    from dexrl.checks.config import Facts
    from dexrl.console import console
    from dexrl.launch_plan import make_plan, render_plan

    refuse_on_errors(result.name, findings)
    out = console()
    out.print(f"Plan for {result.name} ({per_node} GPU(s) per node assumed):", markup=False)
    for line in render_plan(make_plan(result.cfg, Facts(suite, per_node)), per_node):
        out.print(line, markup=False)
    for f in findings:
        out.print(f"warning: {f.render()}", markup=False)
    command = [a for a in sys.argv if a != "--dry-run"]
    out.print(f"Run directory: {target}", markup=False)
    out.print("Run-folder settings (dexrl sets these, in config.yaml too):", markup=False)
    for line in runs.render_settings(settings):
        out.print(f"  {line}", markup=False)
    out.print(f"Launch command: {' '.join(command)}", markup=False)


def mount(app: typer.Typer) -> None:
    """Add the verb to the app."""
    app.command("train", epilog=EPILOG)(train)
