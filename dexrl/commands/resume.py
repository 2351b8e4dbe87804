"""``dexrl resume``: continue a run from its latest complete checkpoint, same config."""

from __future__ import annotations

from pathlib import Path

import typer
from omegaconf import DictConfig, OmegaConf, open_dict
from rich.console import Console

from dexrl import runs, runstate
from dexrl.checks.config import Facts, run_config_checks
from dexrl.commands.train import check_ray_address, gpu_count, refuse_on_errors, run
from dexrl.config import check_override_syntax
from dexrl.errors import DexrlError

EPILOG = """\
Examples:

  dexrl resume runs/libero_spatial_pi0_20261122-101500
      Continues from the latest complete checkpoints/global_step_N with the run's saved config.

  dexrl resume runs/my_run runner.max_steps=600
      Extends the run; run length, checkpoint cadence, logging and placement may change freely.

  dexrl resume runs/my_run --step 100 actor.optim.lr=1e-6 --allow-changes
      Other changes alter the experiment: they are refused with a diff unless --allow-changes.
"""


def apply_overrides(cfg: DictConfig, overrides: list[str]) -> DictConfig:
    """The saved config with ``key=value`` overrides; unknown keys are refused."""
    check_override_syntax(overrides)
    new = OmegaConf.create(OmegaConf.to_container(cfg))
    OmegaConf.set_struct(new, True)
    for item in overrides:
        key, _, value = item.partition("=")
        add = key.startswith("+")
        key = key.lstrip("+")
        if not add and OmegaConf.select(new, key, default=_MISSING) is _MISSING:
            raise DexrlError(f"unknown config key '{key}' in overrides",
                             "check the run's config.yaml, or prefix the override with + to add "
                             "a key", where="overrides")
        parsed = OmegaConf.from_dotlist([f"{key}={value}"])
        with open_dict(new):
            OmegaConf.update(new, key, OmegaConf.select(parsed, key), merge=True, force_add=add)
    return new


_MISSING = object()


def refuse_unsafe_changes(old: DictConfig, new: DictConfig, allow: bool) -> None:
    """Refuse overrides that change the experiment, showing the diff."""
    unsafe = runs.unsafe_changes(runs.config_diff(old, new))
    if unsafe and not allow:
        raise DexrlError(
            f"{len(unsafe)} override(s) change the experiment, not just how long it runs",
            "pass --allow-changes to resume with them anyway, or start a new run",
            details=[f"{k}: {a!r} -> {b!r}" for k, a, b in unsafe],
        )


def resume(
    run_dir: Path = typer.Argument(..., help="The run folder `dexrl train` created."),
    step: int = typer.Option(None, "--step", min=0, help="Resume from this checkpoint step."),
    allow_changes: bool = typer.Option(False, "--allow-changes",
                                       help="Accept overrides that change the experiment."),
    ray_address: str = typer.Option(None, "--ray-address", envvar="RAY_ADDRESS",
                                    help="Attach to this Ray cluster instead of a private one."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show worker logs too."),
    stall_timeout: float = typer.Option(1800.0, "--stall-timeout", min=1,
                                        help="Seconds without progress before giving up."),
    overrides: list[str] = typer.Argument(None, help="Overrides, key=value (see --help)."),
) -> None:
    """Continue a run from its latest complete checkpoint (or --step N)."""
    run_dir = Path(str(run_dir).rstrip("/") or "/")
    old = runs.load_run_config(run_dir)
    checkpoint = runs.pick_checkpoint(run_dir, step)
    new = apply_overrides(old, list(overrides or []))
    refuse_unsafe_changes(old, new, allow_changes)
    manifest = runs.read_manifest(run_dir)
    suite = manifest.get("suite") or OmegaConf.select(new, "env.train.task_suite_name")
    smoke = bool(manifest.get("smoke"))
    per_node = 1 if smoke else (gpu_count() or 1)
    refuse_on_errors(str(run_dir), run_config_checks(new, Facts(suite, per_node)))
    total = runs.planned_steps(new)
    if checkpoint.step >= total:
        raise DexrlError(f"the run already reached step {checkpoint.step} of {total}",
                         f"raise runner.max_steps above {checkpoint.step}, e.g. "
                         f"`dexrl resume {run_dir} runner.max_steps={checkpoint.step + 1}`")
    check_ray_address(ray_address)
    previous = runstate.previous_run(run_dir)
    if previous is not None and previous.still_running:
        raise DexrlError(f"dexrl process {previous.pid} on {previous.host} is still running "
                         "this run", "wait for it to end or stop it (Ctrl-C), then resume; if "
                         f"that process is gone, delete {run_dir / runstate.STATE_FILE}",
                         where=str(run_dir))
    console = Console(highlight=False, soft_wrap=True)
    for line in runstate.story(run_dir):
        console.print(line[0].upper() + line[1:] + ".", markup=False)
    console.print(f"Resuming {run_dir} from {checkpoint.path.name}", markup=False)
    raise typer.Exit(run(new, run_dir, smoke=smoke,
                         resume_from=checkpoint.path, ray_address=ray_address, verbose=verbose,
                         stall_timeout=stall_timeout))


def mount(app: typer.Typer) -> None:
    """Add the verb to the app."""
    app.command("resume", epilog=EPILOG)(resume)
