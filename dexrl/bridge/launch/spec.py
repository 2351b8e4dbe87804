"""What one launch is: :class:`LaunchSpec`, built once by the training session
(:mod:`dexrl.training.session`) and read by :func:`dexrl.bridge.launch.driver.launch` and its
supervisor, instead of a dozen parameters handed down layer by layer."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from dexrl.bridge.registry import EXT_MODULE
from dexrl.errors import DexrlError
from dexrl.runs.layout import LOG_FILE

if TYPE_CHECKING:  # the verbs import this module for --help, which stays light
    from omegaconf import DictConfig

    from dexrl.checkpoints.files.steps import Checkpoint
    from dexrl.config.settings import Settings


def start_step(resume_from: Checkpoint | None) -> int:
    """The step a launch continues from: its checkpoint's (complete only), 0 for a new run."""
    if resume_from is None:
        return 0
    if not resume_from.complete:
        raise DexrlError("not a complete checkpoint", "pass a complete .../global_step_N folder",
                         where=str(resume_from.path), code="checkpoint-incomplete")
    return resume_from.step


@dataclass(frozen=True)
class LaunchOptions:
    """How a run is launched: the flags ``train`` and ``resume`` share."""

    ray_address: str | None = None  # --ray-address (or $RAY_ADDRESS)
    verbose: bool = False  # --verbose: workers' output on the terminal, not in the log
    stall_timeout: float = 1800.0  # --stall-timeout, seconds without a step (or start-up)
    max_restarts: int = 0  # --max-restarts: restarts after a transient failure


@dataclass(frozen=True)
class LaunchSpec:
    """One launch of RLinf for a written run folder, everything the bridge needs.

    ``cfg`` has its run-folder fields set (:func:`dexrl.config.owned_keys.set_run_folder`) for
    ``run_dir`` and ``resume_from``.
    """

    cfg: DictConfig  # resolved
    run_dir: Path
    smoke: bool  # probe OpenGL (EGL, else OSMesa) instead of assuming EGL
    resume_from: Checkpoint | None  # the complete checkpoint it continues from (None: step 0)
    total: int  # the step it stops at
    options: LaunchOptions = field(default_factory=LaunchOptions)
    gpus_per_node: int = 1  # what the config was checked and planned for (its plan's figures)
    node_wait_s: float = 300.0  # for cluster.num_nodes Ray nodes to join
    ext_module: str = EXT_MODULE  # the RLinf extension module (tests pass their own)

    @cached_property
    def settings(self) -> Settings:
        """The typed settings of ``cfg``, read once for the launch and what it reports."""
        from dexrl.config.settings import Settings  # omegaconf: the verbs' --help stays light

        return Settings.read(self.cfg)

    @property
    def start_step(self) -> int:
        """:func:`start_step` of ``resume_from``."""
        return start_step(self.resume_from)

    @property
    def log_hint(self) -> str:
        """Where a failure's full output is: the terminal with ``--verbose``, else the log."""
        return ("the terminal output above" if self.options.verbose
                else str(self.run_dir / LOG_FILE))
