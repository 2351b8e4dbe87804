"""Names users type: LIBERO suites and the policy registry (no heavy imports).

:data:`POLICIES` holds the policies dexrl ships; :func:`policies` adds those that installed
plugins declare (:mod:`dexrl.plugins`). Everything that knows a policy (the RLinf registration,
``--model``, ``dexrl configs``, validate's model check, doctor's round trip) reads it from here.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from dexrl.errors import DexrlError

BUILTIN = "dexrl"  # the distribution of the built-in policies


@dataclass(frozen=True)
class Suite:
    """A task suite and its standard evaluation horizon (openpi/RLinf standalone evals).

    Attributes:
        smoke: The ``conf/smoke`` overlay ``--smoke`` applies (``None``: the config is small
            enough for a CPU already, ``--smoke`` only adds the tiny checkpoint).
        libero: A LIBERO suite (``dexrl eval`` runs those); else one of dexrl's own tasks.
    """

    name: str
    horizon: int
    num_tasks: int
    smoke: str | None = "cpu"
    libero: bool = True


SUITES: dict[str, Suite] = {
    s.name: s
    for s in (
        Suite("libero_spatial", 220, 10),
        Suite("libero_object", 280, 10),
        Suite("libero_goal", 300, 10),
        Suite("libero_10", 520, 10),
        Suite("libero_90", 400, 90),
        # dexrl's built-in reach task (conf/env/reach.yaml), for learning runs on a CPU.
        Suite("reach", 10, 1, smoke=None, libero=False),
    )
}
LIBERO_SUITES = tuple(name for name, s in SUITES.items() if s.libero)


@dataclass(frozen=True)
class Policy:
    """A policy dexrl can train: one registry entry, built in or declared by a plugin.

    A plugin's entry point (group ``dexrl.policies``) resolves to one of these; importing it must
    stay cheap, so the builder and the smoke hook are ``"module:function"`` strings imported only
    when used.

    Attributes:
        name: The CLI name (``--model``), also the entry point's name for a plugin.
        model_type: The RLinf ``model_type`` the builder is registered under.
        description: One line for ``dexrl configs``.
        builder: ``"module:function"``; ``function(cfg, torch_dtype)`` returns the RLinf policy.
        config_package: Importable package whose ``model/`` folder holds the model config.
        model_config: Name of that config in the ``model`` group (default: ``model_type``).
        template: Model type of the shipped configs a plugin policy is composed on.
        suites: The suites it trains on (default: every LIBERO suite).
        settings: Hydra overrides applied after the model config (its default settings).
        smoke_checkpoint: ``"module:function"`` writing a tiny checkpoint to a path for
            ``--smoke``, or ``None`` when the policy needs none.
        replaces_builtin: Whether a plugin may take over a built-in name or model type.
        distribution: The distribution that declares it (set by discovery for plugins).
        always_register: Register even when the builder's module is not installed (built-ins
            that must fail loudly at build time instead of as "unknown model type").
    """

    name: str
    model_type: str
    description: str
    builder: str
    config_package: str = "dexrl.conf"
    model_config: str = ""
    template: str = "dexbotic_pi0"
    suites: tuple[str, ...] = LIBERO_SUITES
    settings: tuple[str, ...] = ()
    smoke_checkpoint: str | None = None
    replaces_builtin: bool = False
    distribution: str = BUILTIN
    always_register: bool = True

    @property
    def builtin(self) -> bool:
        """Shipped with dexrl (its top-level configs are files in ``dexrl.conf``)."""
        return self.distribution == BUILTIN

    @property
    def model_config_name(self) -> str:
        """The config's name in the ``model`` group."""
        return self.model_config or self.model_type


POLICIES: dict[str, Policy] = {
    p.name: p
    for p in (
        Policy("pi0", "dexbotic_pi0", "Dexbotic π0: SigLIP + Gemma-2B with a Gemma action expert",
               "dexrl.bridge.pi0_policy:build", suites=(*LIBERO_SUITES, "reach"),
               smoke_checkpoint="dexrl.testing.checkpoints:write_tiny_pi0"),
        # dexbotic_dm0 is also an RLinf built-in, which dexrl replaces only once its own adapter
        # is installed.
        Policy("dm0", "dexbotic_dm0", "Dexbotic DM0: PE ViT-L/14@728 + Qwen3 with a Qwen3 expert",
               "dexrl.bridge.dm0_policy:build", template="dexbotic_dm0",
               smoke_checkpoint="dexrl.testing.dm0:write_tiny_dm0", always_register=False),
    )
}


def policies() -> dict[str, Policy]:
    """Every usable policy: the built-ins, then the valid plugins (which may replace one)."""
    from dexrl.plugins import discover

    found = discover()
    replaced = {p.model_type for p in found.policies.values()} | set(found.policies)
    merged = {n: p for n, p in POLICIES.items()
              if n not in replaced and p.model_type not in replaced}
    return {**merged, **found.policies}


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
    """Look up a policy by CLI name or model_type, or raise a DexrlError listing the choices.

    A name a broken or conflicting plugin declares raises that plugin's error, which names the
    distributions involved.
    """
    from dexrl.plugins import discover

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
    )


def smoke_overlay(suite: str | None, config: str | None) -> str | None:
    """The ``conf/smoke`` overlay ``--smoke`` applies to a suite (or to a config's suite)."""
    name = suite or (config or "").partition("_ppo_")[0]
    found = SUITES.get(name) or SUITES.get(f"libero_{name}")
    return found.smoke if found is not None else "cpu"


def config_name(suite: str, policy: str) -> str:
    """The shipped top-level config for a suite × policy."""
    return f"{get_suite(suite).name}_ppo_{get_policy(policy).model_type}"
