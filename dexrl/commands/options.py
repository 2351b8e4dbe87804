"""The flags several verbs share, each written once: its name, help and default.

Each function returns a fresh ``typer.Option`` (Typer fills in the object it is given, so one
object must not serve two verbs): ``suite: str = options.suite()``. Not a verb: the one module
of ``dexrl.commands`` the verbs import (tests/repository/test_layering.py).
"""

from __future__ import annotations

from typing import Any

import typer

from dexrl.bridge.launch.spec import LaunchOptions
from dexrl.config.algorithms import ALGO_HELP, NOISE_HELP
from dexrl.errors import DexrlError

MODE_HELP = ("sync (default), async or pipeline: the config's execution mode "
             "(docs/execution-modes.md).")


def suite() -> Any:
    """``--suite``/``-s`` (train, validate, doctor)."""
    return typer.Option(None, "--suite", "-s", help="LIBERO suite (e.g. libero_spatial) or "
                        "built-in task (reach, reach_cued).")


def model() -> Any:
    """``--model``/``-m`` (train, validate, doctor)."""
    return typer.Option(None, "--model", "-m",
                        help="Policy: pi0, dm0 or a plugin's (`dexrl configs` lists them).")


def config_name() -> Any:
    """``--config-name``/``-c`` (train, validate, doctor)."""
    return typer.Option(None, "--config-name", "-c",
                        help="A shipped config name instead of --suite/--model.")


def overrides() -> Any:
    """The ``key=value`` arguments (train, validate, doctor)."""
    return typer.Argument(None, help="Hydra overrides, key=value.")


def mode() -> Any:
    """``--mode`` (train, validate, doctor)."""
    return typer.Option(None, "--mode", help=MODE_HELP)


def algo() -> Any:
    """``--algo`` (train, validate, doctor)."""
    return typer.Option(None, "--algo", help=ALGO_HELP)


def noise() -> Any:
    """``--noise`` (train, validate, doctor)."""
    return typer.Option(None, "--noise", help=NOISE_HELP)


def ckpt() -> Any:
    """``--ckpt`` (train, doctor)."""
    return typer.Option(None, "--ckpt", help="Checkpoint dir or downloaded repo id.")


def ray_address() -> Any:
    """``--ray-address``, else ``$RAY_ADDRESS`` (train, resume, doctor)."""
    return typer.Option(None, "--ray-address", envvar="RAY_ADDRESS",
                        help="Attach to this Ray cluster instead of a private one.")


def verbose() -> Any:
    """``--verbose``/``-v`` of a launch (train, resume)."""
    return typer.Option(False, "--verbose", "-v", help="Show worker logs too.")


def stall_timeout() -> Any:
    """``--stall-timeout`` (train, resume)."""
    return typer.Option(LaunchOptions.stall_timeout, "--stall-timeout", min=1,
                        help="Seconds without progress before giving up.")


def max_restarts() -> Any:
    """``--max-restarts`` (train, resume)."""
    return typer.Option(LaunchOptions.max_restarts, "--max-restarts", min=0,
                        help="Restart from the last complete checkpoint after a worker died, a "
                        "node was lost or the run stalled, up to N times (docs/failures.md).")


def memory_plan() -> Any:
    """``--memory-plan`` (train)."""
    return typer.Option("auto", "--memory-plan",
                        help="auto (default: the largest plan whose memory estimate fits this "
                        "machine's GPUs), 80gb, 48gb or 24gb: what a run moves off the GPU "
                        "(docs/performance.md#memory-plans). A key=value you give wins over "
                        "the plan's.")


def refuse_json_without_dry_run(as_json: bool, dry_run: bool, *, progress: str,
                                as_data: str) -> None:
    """``--json`` of a launching verb (train, resume) describes a dry run only.

    Args:
        progress: Whose progress is lines of text ("a training run's progress").
        as_data: What ``--dry-run --json`` gives ("the plan").
    """
    if as_json and not dry_run:
        raise DexrlError(f"--json needs --dry-run: {progress} is lines of text, not one JSON "
                         f"document", f"add --dry-run for {as_data} as JSON; a run's metrics are "
                         "in RUN_DIR/tensorboard, its state in RUN_DIR/run-state.json",
                         code="flags-json-needs-dry-run")
