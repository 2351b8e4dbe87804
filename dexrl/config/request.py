"""Which config a verb asks for: ``train``, ``validate`` and ``doctor`` hand their config flags
over as one :class:`ConfigRequest`, and its :meth:`~ConfigRequest.hydra_overrides` is the one
place their Hydra override list is built."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dexrl.catalog import smoke_overlay
from dexrl.config.algorithms import algo_overrides


def ckpt_overrides(path: Path) -> list[str]:
    """Point both model paths at one checkpoint (the rollout follows the actor)."""
    return [f"actor.model.model_path={path}"]


@dataclass(frozen=True)
class ConfigRequest:
    """A verb's config flags: the config (``--suite/--model`` or ``--config-name``), what
    changes it (``--mode``, ``--algo``, ``--noise``, ``--smoke``, a located ``--ckpt``) and the
    user's own ``key=value`` overrides."""

    suite: str | None = None
    model: str | None = None
    config_name: str | None = None
    mode: str | None = None  # --mode: sync, async or pipeline (dexrl.config.modes)
    algo: str | None = None  # --algo: ppo or grpo (dexrl.config.algorithms)
    noise: str | None = None  # --noise: flow_sde or flow_noise
    smoke: bool = False  # --smoke: the suite's conf/smoke overlay
    ckpt_path: Path | None = None  # --ckpt, located (dexrl.checkpoints.sources)
    overrides: tuple[str, ...] = ()

    @property
    def names_config(self) -> bool:
        """Whether the flags name a config to compose (a suite alone names none for doctor)."""
        return bool(self.model or self.config_name)

    def hydra_overrides(self) -> list[str]:
        """The overrides to compose with, in the order they apply: the smoke overlay, the
        checkpoint, the mode, the algorithm and noise, then the user's (which win).

        Raises:
            DexrlError: an unknown ``--mode``, ``--algo`` or ``--noise``.
        """
        from dexrl.config.modes import mode_overrides  # omegaconf: not for the verbs' --help

        overlay = smoke_overlay(self.suite, self.config_name) if self.smoke else None
        return [*([f"+smoke={overlay}"] if overlay else []),
                *(ckpt_overrides(self.ckpt_path) if self.ckpt_path else []),
                *mode_overrides(self.mode),
                *algo_overrides(self.algo, self.noise, self.suite, self.config_name),
                *self.overrides]
