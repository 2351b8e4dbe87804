"""Names users type: LIBERO suites and the policies dexrl ships (no heavy imports)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from dexrl.errors import DexrlError


@dataclass(frozen=True)
class Suite:
    """A LIBERO task suite and its standard evaluation horizon (openpi/RLinf standalone evals)."""

    name: str
    horizon: int
    num_tasks: int


@dataclass(frozen=True)
class Policy:
    """A policy dexrl can train: its CLI name, RLinf ``model_type`` and model config group."""

    name: str
    model_type: str
    description: str


SUITES: dict[str, Suite] = {
    s.name: s
    for s in (
        Suite("libero_spatial", 220, 10),
        Suite("libero_object", 280, 10),
        Suite("libero_goal", 300, 10),
        Suite("libero_10", 520, 10),
        Suite("libero_90", 400, 90),
    )
}

POLICIES: dict[str, Policy] = {
    p.name: p
    for p in (
        Policy("pi0", "dexbotic_pi0", "Dexbotic π0: SigLIP + Gemma-2B with a Gemma action expert"),
        Policy("dm0", "dexbotic_dm0", "Dexbotic DM0: PE ViT-L/14@728 + Qwen3 with a Qwen3 expert"),
    )
}


def did_you_mean(value: str, choices: list[str]) -> str:
    """Return a ' Did you mean X?' suffix when a close match exists, else ''."""
    close = difflib.get_close_matches(value, choices, n=1, cutoff=0.5)
    return f" Did you mean '{close[0]}'?" if close else ""


def get_suite(name: str) -> Suite:
    """Look up a suite by name, or raise a DexrlError listing the choices."""
    if name in SUITES:
        return SUITES[name]
    if f"libero_{name}" in SUITES:
        return SUITES[f"libero_{name}"]
    raise DexrlError(
        f"unknown suite '{name}'.{did_you_mean(name, list(SUITES))}",
        f"use one of: {', '.join(SUITES)}",
        where="--suite",
    )


def get_policy(name: str) -> Policy:
    """Look up a policy by CLI name or model_type, or raise a DexrlError listing the choices."""
    if name in POLICIES:
        return POLICIES[name]
    for p in POLICIES.values():
        if p.model_type == name:
            return p
    raise DexrlError(
        f"unknown model '{name}'.{did_you_mean(name, list(POLICIES))}",
        f"use one of: {', '.join(POLICIES)}",
        where="--model",
    )


def config_name(suite: str, policy: str) -> str:
    """The shipped top-level config for a suite × policy."""
    return f"{get_suite(suite).name}_ppo_{get_policy(policy).model_type}"
