"""Algorithm and exploration-noise selectors (``--algo``, ``--noise``): the Hydra overlays each
stands for, and what a config runs, in words.

Design notes: docs/algorithms.md.
"""

from __future__ import annotations

from typing import Any

from dexrl.catalog import SUITES
from dexrl.errors import DexrlError

ALGOS = ("ppo", "grpo")
"""``ppo``: the shipped PPO (GAE advantages from a value head); ``grpo``: RLinf's GRPO
(group-relative returns, no critic)."""
NOISES = ("flow_sde", "flow_noise")
"""``flow_sde``: the shipped SDE noise of fixed scale on one scored step; ``flow_noise``: πRL's
learned noise head on every step, the joint log-prob scored."""
ALGO_SUMMARY = ("ppo (shipped: GAE advantages, a value head), grpo (RLinf's GRPO: each episode "
                "against its group's mean return, no critic)")
NOISE_SUMMARY = ("flow_sde (shipped: fixed-scale noise on one scored denoising step), "
                 "flow_noise (a learned noise head on every step)")
ALGO_HELP = ("ppo (default): PPO with GAE and a value head. grpo: RLinf's GRPO, group-relative "
             "returns, no critic (docs/algorithms.md).")
NOISE_HELP = ("flow_sde (default): fixed-scale noise on one scored denoising step. flow_noise: a "
              "learned noise head on every step (docs/algorithms.md).")
_GROUPED = ("grpo", "grpo_dynamic", "reinpp_baseline")  # rlinf/config.py: group_size > 1


def algo_overrides(algo: str | None, noise: str | None, suite: str | None,
                   config: str | None) -> list[str]:
    """The Hydra overrides ``--algo`` and ``--noise`` stand for (the shipped choices add none).

    ``--algo grpo`` is ``+algo=grpo`` (conf/algo/grpo.yaml, RLinf's groups of 8) on LIBERO and
    ``+algo=grpo_tasks`` (groups of 4) on dexrl's built-in tasks, whose 32 envs must split into
    whole groups over up to 8 env ranks.

    Raises:
        DexrlError: a name that is not a choice.
    """
    out = []
    if algo not in (None, "ppo"):
        if algo not in ALGOS:
            raise DexrlError(f"--algo {algo} is not an algorithm",
                             f"use one of {', '.join(ALGOS)} (docs/algorithms.md)",
                             code="flags-algo-unknown")
        out.append("+algo=grpo" if _libero(suite, config) else "+algo=grpo_tasks")
    if noise not in (None, "flow_sde"):
        if noise not in NOISES:
            raise DexrlError(f"--noise {noise} is not a noise method",
                             f"use one of {', '.join(NOISES)} (docs/algorithms.md)",
                             code="flags-noise-unknown")
        out.append(f"+noise={noise}")
    return out


def _libero(suite: str | None, config: str | None) -> bool:
    name = suite or (config or "").partition("_ppo_")[0]
    found = SUITES.get(name) or SUITES.get(f"libero_{name}")
    return found is None or found.libero


def algorithm_of(cfg: Any) -> str:
    """``grpo`` for a group-relative advantage (RLinf's ``grpo``, ``grpo_dynamic``), else
    ``ppo`` (GAE and the others RLinf registers train with the PPO loss too); ``cfg``: a config
    or its :class:`~dexrl.config.settings.Settings`."""
    from dexrl.config.settings import given, settings_of  # omegaconf: not for --help

    adv = str(given(settings_of(cfg).algorithm.adv_type, "gae"))
    return "grpo" if adv.startswith("grpo") else "ppo"


def is_grouped(cfg: Any) -> bool:
    """Whether the advantage compares the episodes of a group (RLinf asserts group_size > 1)."""
    from dexrl.config.settings import given, settings_of  # omegaconf: not for --help

    return str(given(settings_of(cfg).algorithm.adv_type, "gae")) in _GROUPED


def algorithm_text(cfg: Any) -> str:
    """The algorithm and the exploration noise in words (``train --dry-run``)."""
    from dexrl.config.settings import given, settings_of  # omegaconf: not for --help

    s = settings_of(cfg)
    algorithm, model = s.algorithm, s.actor.model
    adv = given(algorithm.adv_type, "gae")
    loss = given(algorithm.loss_type, "actor_critic")
    critic = "a value head (critic)" if given(model.add_value_head, False) else "no value head"
    group = given(algorithm.group_size, 1)
    grouping = f", groups of {group} envs on one initial state" if is_grouped(s) else ""
    noise = given(model.dexbotic.noise_method, "flow_sde")
    if noise == "flow_noise":
        shown = ", ".join(str(b) for b in given(model.dexbotic.noise_logvar_range, [0.08, 0.16]))
        noise_text = f"flow_noise (learned std in [{shown}], every step scored)"
    else:
        noise_text = f"{noise} (level {given(model.dexbotic.noise_level, 0.5)})"
    return (f"{algorithm_of(s)} (adv_type {adv}, loss_type {loss}, {critic}{grouping}); "
            f"noise {noise_text}")


__all__ = ["ALGOS", "ALGO_HELP", "ALGO_SUMMARY", "NOISES", "NOISE_HELP", "NOISE_SUMMARY",
           "algo_overrides", "algorithm_of", "algorithm_text", "is_grouped"]
