"""The memory plans of ``dexrl train --memory-plan``: what each moves off the GPU, as settings.

A plan is a few ``key=value`` settings applied after the config's own groups and before the
user's overrides, so a user's ``key=value`` always wins over the plan (the dry run says which
did). The settings come from the composed config: a plan only ever lowers the micro-batch and
the GPU prefix cache, never raises them. Which plan fits which GPU is
:mod:`dexrl.training.memory`'s estimate; the reasoning behind each lever is in
docs/performance.md#memory-plans.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

from omegaconf import DictConfig, OmegaConf, open_dict

from dexrl.catalog import policy_for
from dexrl.config.modes import SYNC, run_mode
from dexrl.config.overrides import TRAINING, parse_overrides
from dexrl.config.settings import Settings, given
from dexrl.errors import DexrlError

AUTO = "auto"
RECORD_KEY = "runner.memory_plan"  # the plan a run was composed with (settings.Runner)


@dataclass(frozen=True)
class MemoryPlan:
    """One plan: its name, the card size it is for and the levers it pulls.

    Attributes:
        name: ``80gb``, ``48gb`` or ``24gb``.
        card_gb: The GPU memory it is for (GB, as the cards are sold).
        micro_batch_cap: ``actor.micro_batch_size`` at most this (0: unchanged).
        activation_gb: And at most what keeps a training micro-batch's activations within this
            many GB (0: no such bound; :func:`micro_batch`).
        prefix_cache_device_gb: ``prefix_cache.device_gb`` at most this (None: unchanged).
        prefix_cache_host_gb: ``prefix_cache.host_gb`` at least this (None: unchanged).
        offload: ``actor.enable_offload`` and ``rollout.enable_offload`` on (RLinf moves the
            idle worker's weights, and the actor's optimizer state, to the host between phases;
            synchronous runs only: RLinf's async runner refuses offload, its pipeline ignores
            the actor's).
        summary: One line for the dry run.
    """

    name: str
    card_gb: int
    micro_batch_cap: int = 0
    activation_gb: float = 0.0
    prefix_cache_device_gb: float | None = None
    prefix_cache_host_gb: float | None = None
    offload: bool = False
    summary: str = ""


# Largest first: `auto` takes the first whose estimate fits.
PLANS: tuple[MemoryPlan, ...] = (
    MemoryPlan("80gb", 80, summary="the shipped settings, nothing moved"),
    MemoryPlan("48gb", 48, micro_batch_cap=16, activation_gb=6.0, prefix_cache_device_gb=16.0,
               prefix_cache_host_gb=16.0,
               summary="micro-batch ≤ 16 (activations ≤ 6 GB); the prefix cache 16 GB on the "
                       "GPU, 16 GB pinned on the host"),
    MemoryPlan("24gb", 24, micro_batch_cap=16, activation_gb=3.0, prefix_cache_device_gb=0.0,
               prefix_cache_host_gb=32.0, offload=True,
               summary="micro-batch ≤ 16 (activations ≤ 3 GB); the prefix cache pinned on the "
                       "host (32 GB); actor and rollout offloaded to the host between phases"),
)
NAMES = tuple(p.name for p in PLANS)
CHOICES = (AUTO, *NAMES)


def plan_named(name: str) -> MemoryPlan:
    """The plan called ``name``.

    Raises:
        DexrlError: ``flags-memory-plan-unknown``.
    """
    for plan in PLANS:
        if plan.name == name:
            return plan
    raise DexrlError(f"--memory-plan {name} is not a memory plan",
                     f"use one of {', '.join(CHOICES)} (docs/performance.md#memory-plans)",
                     code="flags-memory-plan-unknown")


def check_choice(name: str | None) -> str:
    """``--memory-plan``'s value, checked (None: ``auto``)."""
    if name in (None, AUTO):
        return AUTO
    return plan_named(str(name)).name


def plan_settings(plan: MemoryPlan, s: Settings) -> dict[str, object]:
    """The settings ``plan`` applies to a config whose settings are ``s`` (dotted key -> value;
    what is already at or below the plan's level is left out)."""
    out: dict[str, object] = {}
    mbs = s.actor.micro_batch_size
    smaller = micro_batch(plan, s)
    if mbs is not None and smaller < mbs:
        out["actor.micro_batch_size"] = smaller
    cache = s.actor.model.dexbotic.prefix_cache
    if s.actor.model.dexbotic.train_expert_only is True and cache.device_gb is not None:
        device = plan.prefix_cache_device_gb
        if device is not None and cache.device_gb > device:
            out["actor.model.dexbotic.prefix_cache.device_gb"] = device
        host = given(cache.host_gb, 0.0)
        if plan.prefix_cache_host_gb is not None and host < plan.prefix_cache_host_gb:
            out["actor.model.dexbotic.prefix_cache.host_gb"] = plan.prefix_cache_host_gb
    if plan.offload and run_mode(s) == SYNC:  # RLinf's async and pipeline runners never offload
        for key, value in (("actor.enable_offload", s.actor.enable_offload),
                           ("rollout.enable_offload", s.rollout.enable_offload)):
            if value is not True:
                out[key] = True
    return out


def micro_batch(plan: MemoryPlan, s: Settings) -> int:
    """``actor.micro_batch_size`` under ``plan``: the largest divisor of the config's (so the
    global batch still divides) within the plan's cap and, where the model declares its
    activations per sample, within :attr:`MemoryPlan.activation_gb`."""
    mbs = int(given(s.actor.micro_batch_size, 1))
    cap = plan.micro_batch_cap or mbs
    policy = policy_for(str(s.actor.model.model_type))
    per_sample = policy.model.memory_gb_per_sample[0] if policy is not None else 0.0
    if plan.activation_gb and per_sample:
        cap = min(cap, max(1, int(plan.activation_gb / per_sample)))
    return max(d for d in range(1, mbs + 1) if mbs % d == 0 and d <= max(cap, 1))


def plan_overrides(plan: MemoryPlan, s: Settings) -> list[str]:
    """The Hydra overrides of ``plan`` (before the user's, which win), its name recorded."""
    return [f"+{RECORD_KEY}={plan.name}",
            *(f"{key}={_yaml(value)}" for key, value in plan_settings(plan, s).items())]


def apply_plan(cfg: DictConfig, plan: MemoryPlan, user_overrides: Sequence[str]
               ) -> tuple[DictConfig, dict[str, object], dict[str, str]]:
    """A copy of ``cfg`` (composed with the user's overrides) under ``plan``, as composing it
    with :func:`plan_overrides` before the user's would give, without composing again; with
    the plan's settings and the ones the user's ``key=value`` kept (:func:`user_wins`)."""
    settings = plan_settings(plan, Settings.read(cfg))
    kept = user_wins(settings, user_overrides)
    out = copy.deepcopy(cfg)
    with open_dict(out):
        for key, value in settings.items():
            if key not in kept:
                OmegaConf.update(out, key, value, merge=False)
        OmegaConf.update(out, RECORD_KEY, plan.name, force_add=True)
    return out, settings, kept


def user_wins(plan_keys: dict[str, object], user_overrides: Sequence[str]) -> dict[str, str]:
    """The plan's keys a user's ``key=value`` sets too (key -> the user's value): the user's
    value is the one the run gets."""
    given_keys = {o.key: o.value for o in parse_overrides(list(user_overrides), TRAINING)}
    return {key: given_keys[key] for key in plan_keys if key in given_keys}


def _yaml(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
