"""Names users type: LIBERO suites and the policy registry (no heavy imports).

:data:`POLICIES` holds the policies dexrl ships (each declared in its model's package,
``dexrl.models.<model>.spec``);
:func:`policies` adds those that installed plugins declare (:mod:`dexrl.plugins`). Everything that
knows a policy or a model type (the RLinf registration, ``--model``, ``dexrl configs``, the
config and checkpoint checks, ``--dry-run``'s plan, eval, the hub's known repositories, doctor's
round trip) reads it from here, the per-model facts from its :class:`ModelSpec`.
"""

from __future__ import annotations

import difflib

from dexrl.errors import DexrlError
from dexrl.models import BUILTIN_POLICIES as POLICIES
from dexrl.plugins import discover
from dexrl.specs import LIBERO_SUITES, SUITES, ModelSpec, Policy, Suite, load_reference

# ModelSpec and Policy are what a plugin declares (docs/adding-a-policy.md imports them from here);
# LIBERO_SUITES and load_reference are imported from here too.
__all__ = ["LIBERO_SUITES", "POLICIES", "SUITES", "ModelSpec", "Policy", "config_name",
           "did_you_mean", "get_policy", "get_suite", "load_reference", "model_types", "policies",
           "policy_for", "smoke_overlay"]


def policies() -> dict[str, Policy]:
    """Every usable policy: the built-ins, then the valid plugins (which may replace one)."""
    found = discover()
    replaced = {p.model_type for p in found.policies.values()} | set(found.policies)
    merged = {n: p for n, p in POLICIES.items()
              if n not in replaced and p.model_type not in replaced}
    return {**merged, **found.policies}


def model_types() -> tuple[str, ...]:
    """The model types of every usable policy: the checkpoints dexrl can check and train."""
    return tuple(p.model_type for p in policies().values())


def policy_for(model_type: str) -> Policy | None:
    """The usable policy of a checkpoint's ``model_type``, or None."""
    return next((p for p in policies().values() if p.model_type == model_type), None)


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
        code="unknown-suite",
    )


def get_policy(name: str) -> Policy:
    """Look up a policy by CLI name or model_type, or raise a DexrlError listing the choices.

    A name a broken or conflicting plugin declares raises that plugin's error, which names the
    distributions involved.
    """
    for problem in discover().problems:
        if name in problem.names:
            raise problem.error()
    known = policies()
    if name in known:
        return known[name]
    for p in known.values():
        if p.model_type == name:
            return p
    raise DexrlError(
        f"unknown model '{name}'.{did_you_mean(name, list(known))}",
        f"use one of: {', '.join(known)}",
        where="--model",
        code="unknown-model",
    )


def config_name(suite: str, policy: str) -> str:
    """The shipped top-level config for a suite × policy."""
    return f"{get_suite(suite).name}_ppo_{get_policy(policy).model_type}"


def smoke_overlay(suite: str | None, config: str | None) -> str | None:
    """The ``conf/smoke`` overlay ``--smoke`` applies to a suite (or to a config's suite)."""
    name = suite or (config or "").partition("_ppo_")[0]
    found = SUITES.get(name) or SUITES.get(f"libero_{name}")
    return found.smoke if found is not None else "cpu"
