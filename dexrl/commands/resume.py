"""``dexrl resume``: continue a run from its latest complete checkpoint, same config."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from dexrl.errors import DexrlError
from dexrl.training import check_ray_address, gpu_count, refuse_on_errors, run

if TYPE_CHECKING:
    from omegaconf import DictConfig

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
"""


def apply_overrides(cfg: DictConfig, overrides: list[str]) -> DictConfig:
    """The saved config with ``key=value`` overrides; unknown keys are refused."""
    from omegaconf import OmegaConf, open_dict

    from dexrl.config import check_override_syntax

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
    from dexrl import runs

    unsafe = runs.unsafe_changes(runs.config_diff(old, new))
    if unsafe and not allow:
        raise DexrlError(
            f"{len(unsafe)} override(s) change the experiment, not just how long it runs",
            "pass --allow-changes to resume with them anyway, or start a new run",
            details=diff_lines(unsafe),
        )


def diff_lines(diff: list[tuple[str, Any, Any]], owned: Iterable[str] = ()) -> list[str]:
    """``key: old -> new`` per change; keys in ``owned`` are marked as set by dexrl."""
    from dexrl import runs

    def show(value: Any) -> str:
        return "(absent)" if value is runs.ABSENT else repr(value)

    return [f"{k}: {show(a)} -> {show(b)}" + ("  (set by dexrl)" if k in owned else "")
            for k, a, b in diff]


def resume(
    run_dir: Path = typer.Argument(..., help="The run folder `dexrl train` created."),
    step: int = typer.Option(None, "--step", min=0, help="Resume from this checkpoint step."),
    allow_changes: bool = typer.Option(False, "--allow-changes",
                                       help="Accept overrides that change the experiment."),
    ray_address: str = typer.Option(None, "--ray-address", envvar="RAY_ADDRESS",
                                    help="Attach to this Ray cluster instead of a private one."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what would continue, from which "
                                 "step, with which config changes; start and write nothing."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show worker logs too."),
    stall_timeout: float = typer.Option(1800.0, "--stall-timeout", min=1,
                                        help="Seconds without progress before giving up."),
    overrides: list[str] = typer.Argument(None, help="Overrides, key=value (see --help)."),
) -> None:
    """Continue a run from its latest complete checkpoint (or --step N)."""
    from omegaconf import OmegaConf

    from dexrl import runs, runstate
    from dexrl.checks.config import Facts, run_config_checks
    from dexrl.console import console

    overrides = list(overrides or [])
    runs.refuse_owned_overrides(overrides, "a resumed run stays in its folder and --step N picks "
                                "the checkpoint")
    opened = runs.open_run(run_dir)
    checkpoint = runs.pick_checkpoint(opened.dir, step)
    old = opened.config
    new = apply_overrides(old, overrides)
    refuse_unsafe_changes(old, new, allow_changes)
    settings = runs.set_run_folder(new, opened.dir, checkpoint.path)
    suite = opened.manifest.get("suite") or OmegaConf.select(new, "env.train.task_suite_name")
    smoke = bool(opened.manifest.get("smoke"))
    per_node = 1 if smoke else (gpu_count() or 1)
    refuse_on_errors(str(opened.dir), run_config_checks(new, Facts(suite, per_node)))
    total = runs.check_steps_left(new, checkpoint.step, run_dir)
    out = console()
    notes = [line[0].upper() + line[1:] + "." for line in runstate.story(opened.dir)]
    notes += runs.skipped(opened.dir, checkpoint)
    if opened.moved_from is not None:
        notes.append(f"note: the run folder was at {opened.moved_from}; its paths now point "
                     f"into {opened.dir}")
    if dry_run:
        out.print(f"Would resume {opened.dir} from {checkpoint.path.name}: steps "
                  f"{checkpoint.step + 1} to {total} of {total}. Nothing was started or written.",
                  markup=False)
        for line in [*notes, "Config changes:",
                     *(f"  {d}" for d in diff_lines(runs.config_diff(old, new), settings))]:
            out.print(line, markup=False)
        return
    check_ray_address(ray_address)
    previous = runstate.previous_run(opened.dir)
    if previous is not None and previous.still_running:
        raise DexrlError(f"dexrl process {previous.pid} on {previous.host} is still running "
                         "this run", "wait for it to end or stop it (Ctrl-C), then resume; if "
                         f"that process is gone, delete {opened.dir / runstate.STATE_FILE}",
                         where=str(opened.dir))
    new = runs.resolved(new)
    runs.save_config(opened.dir, new)
    out.print(f"Resuming {opened.dir} from {checkpoint.path.name}", markup=False)
    for line in notes:
        out.print(line, markup=False)
    raise typer.Exit(run(new, opened.dir, smoke=smoke, resume_from=checkpoint.path,
                         ray_address=ray_address, verbose=verbose, stall_timeout=stall_timeout))


def mount(app: typer.Typer) -> None:
    """Add the verb to the app."""
    app.command("resume", epilog=EPILOG)(resume)
