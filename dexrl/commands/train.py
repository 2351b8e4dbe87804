"""``dexrl train``: compose, validate, register the models and hand the run to RLinf."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from dexrl.bridge.launch.spec import LaunchOptions
from dexrl.commands import options
from dexrl.config.request import ConfigRequest
from dexrl.console import console, print_json
from dexrl.training.session import (
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

  dexrl train --suite reach --model pi0 --smoke
      dexrl's built-in reach task on the CPU with a tiny random π0, at its shipped size (20 PPO
      steps, 32 envs): the return rises within about 3 minutes (docs/learning.md).

  dexrl train --suite libero_spatial --model pi0 --ckpt Dexmal/libero-db-pi0
      Full PPO on this node's GPUs (the repo id must have been fetched by `dexrl download`).

  dexrl train --suite libero_spatial --model pi0 --ckpt Dexmal/libero-db-pi0 --mode async
      RLinf's async PPO: the actor trains on GPUs 0-3 while env and rollout run on 4-7
      (docs/execution-modes.md).

  dexrl train --suite libero_spatial --model pi0 --ckpt /data/libero-db-pi0 --dry-run
      Prints placement, per-step work, checkpoint size and a memory estimate; starts nothing.
      With --json the same plan as one JSON document (schema dexrl.train-plan/1).

  dexrl train --suite libero_10 --model pi0 --ray-address 10.0.0.1:6379 cluster.num_nodes=2
      Attach to a Ray cluster started on every node with RLINF_NODE_RANK set (see
      docs/multi-node.md).
"""

PLAN_SCHEMA = "dexrl.train-plan/1"  # `--dry-run --json`


def train(
    suite: str = options.suite(),
    model: str = options.model(),
    config_name: str = options.config_name(),
    ckpt: str = options.ckpt(),
    name: str = typer.Option(None, "--name", help="Run name (default <suite>_<model>_<time>)."),
    run_dir: Path = typer.Option(None, "--run-dir", help="Run directory (default runs/<name>)."),
    ray_address: str = options.ray_address(),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan; start nothing."),
    smoke: bool = typer.Option(False, "--smoke",
                               help="Tiny random model on the CPU. LIBERO suites: one env, one "
                               "step; built-in tasks (reach, reach_cued): their shipped steps "
                               "and envs."),
    verbose: bool = options.verbose(),
    gpus_per_node: int = typer.Option(None, "--gpus-per-node", min=1,
                                      help="GPUs per node (default: this node's, else 8)."),
    stall_timeout: float = options.stall_timeout(),
    max_restarts: int = options.max_restarts(),
    overrides: list[str] = options.overrides(),
    as_json: bool = typer.Option(False, "--json", help="With --dry-run: print one JSON document "
                                 f"(schema {PLAN_SCHEMA}) instead of text."),
    mode: str = options.mode(),
    algo: str = options.algo(),
    noise: str = options.noise(),
    memory_plan: str = options.memory_plan(),
) -> None:
    """Train a policy with PPO or GRPO on a LIBERO suite or a built-in task via RLinf."""
    from dexrl.doctor.cuda import smallest_gpu_gb

    options.refuse_json_without_dry_run(as_json, dry_run, progress="a training run's progress",
                                        as_data="the plan")
    new = prepare(TrainRequest(
        config=ConfigRequest(suite=suite, model=model, config_name=config_name, mode=mode,
                             algo=algo, noise=noise, smoke=smoke,
                             overrides=tuple(overrides or ())),
        ckpt=ckpt, name=name, run_dir=run_dir, dry_run=dry_run, gpus_per_node=gpus_per_node,
        launch=LaunchOptions(ray_address=ray_address, verbose=verbose,
                             stall_timeout=stall_timeout, max_restarts=max_restarts),
        memory_plan=memory_plan, gpu_gb=None if smoke else smallest_gpu_gb()))
    if dry_run:
        show_plan(new, as_json=as_json)
        return
    raise typer.Exit(run(start(new)))


def show_plan(new: NewRun, *, as_json: bool = False) -> None:
    """Print what a launch would do (``--dry-run``; ``as_json``: as one document); nothing is
    started or written."""
    from dexrl.config.owned_keys import render_settings
    from dexrl.config.resume_rules import planned_steps
    from dexrl.training.forecast import (
        device_kind,
        forecast_record,
        make_forecast,
        render_forecast,
    )
    from dexrl.training.memory_choice import choice_record, render_choice
    from dexrl.training.plan import plan_record, render_plan

    result, findings, per_node = new.result, new.findings, new.per_node
    target, owned = new.target, new.owned
    refuse_on_errors(result.name, findings)
    plan = launch_plan(new)
    device, read_here = device_kind(new.smoke)
    forecast = make_forecast(result.settings or result.cfg, plan, device)
    command = [a for a in sys.argv if a not in ("--dry-run", "--json")]
    if as_json:
        print_json(PLAN_SCHEMA, config_name=result.name, gpus_per_node=per_node,
                   smoke=new.smoke, global_steps=planned_steps(result.cfg),
                   plan=plan_record(plan, per_node),
                   memory_plan=choice_record(new.memory),
                   forecast=forecast_record(forecast, device, read_here),
                   findings=[f.document() for f in findings], run_dir=target,
                   run_folder_settings=owned, launch_command=command)
        return
    out = console()
    out.print(f"Plan for {result.name} ({per_node} GPU(s) per node assumed):", markup=False)
    lines = render_choice(new.memory) + render_plan(plan, per_node)
    for line in lines + render_forecast(forecast, device, read_here):
        out.print(line, markup=False)
    for f in findings:
        out.print(f"warning: {f.render()}", markup=False)
    out.print(f"Run directory: {target}", markup=False)
    out.print("Run-folder settings (dexrl sets these, in config.yaml too):", markup=False)
    for line in render_settings(owned):
        out.print(f"  {line}", markup=False)
    out.print(f"Launch command: {' '.join(command)}", markup=False)


def mount(app: typer.Typer) -> None:
    """Add the verb to the app."""
    app.command("train", epilog=EPILOG)(train)
