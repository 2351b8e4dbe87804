"""What every doctor area gets: the user's choices, the composed config and the time budget."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from dexrl.config.settings import Settings

DEFAULT_SUITE = "libero_spatial"


class BudgetExhausted(RuntimeError):
    """The doctor's total time budget ran out before a probe could start."""


@dataclass
class Budget:
    """A total wall-clock budget shared by every probe, so that doctor never hangs.

    Attributes:
        total_s: Seconds for the whole run.
        start: ``time.monotonic()`` at the start.
    """

    total_s: float
    start: float = field(default_factory=time.monotonic)

    def elapsed(self) -> float:
        """Seconds since the start."""
        return time.monotonic() - self.start

    def remaining(self) -> float:
        """Seconds left (negative once overrun)."""
        return self.total_s - self.elapsed()

    def timeout(self, cap: float) -> float:
        """A probe's timeout: ``cap``, or what is left of the budget when that is less.

        Raises:
            BudgetExhausted: when less than a second is left.
        """
        left = self.remaining()
        if left < 1.0:
            raise BudgetExhausted(f"the {self.total_s:.0f} s budget ran out")
        return min(cap, left)


@dataclass
class Context:
    """Inputs of one doctor run, plus facts areas share (filled as areas run).

    Attributes:
        budget: The total time budget.
        cfg: The composed training config, when one was chosen.
        config_name: Its name.
        suite: The LIBERO suite to exercise.
        ckpt: The checkpoint to verify (``--ckpt`` or the config's model path).
        ray_address: Attach to this Ray cluster instead of starting a private one.
        quick: Skip the slow probes (the LIBERO env step, renders beyond the first GPU).
        facts: Facts areas share and the report's environment block uses (``versions``,
            ``cuda``: :class:`~dexrl.doctor.cuda.CudaFacts`, ``env``: the variables at start).
    """

    budget: Budget
    cfg: DictConfig | None = None
    config_name: str | None = None
    suite: str = DEFAULT_SUITE
    ckpt: Path | None = None
    ray_address: str | None = None
    quick: bool = False
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def settings(self) -> Settings | None:
        """The config's typed settings, or None without a config."""
        return None if self.cfg is None else Settings.read(self.cfg)


NO_CONFIG_FIX = "pass --suite S --model M or --config-name NAME to check against a config"
