"""Dexbotic π0 and DM0: one package per model (config, network, loader, policy, tokenization,
its checks, its catalog entry ``spec`` and its tiny-checkpoint writer ``tiny``), what they share
in ``flow/``, checkpoint-folder files and weights. No rlinf imports here; importing the package is
cheap. Loading a checkpoint of any model: ``from dexrl import load_policy``.
"""

from __future__ import annotations

import warnings
from typing import Any

import dexrl
from dexrl.models.dm0.spec import POLICY as DM0_POLICY
from dexrl.models.pi0.spec import POLICY as PI0_POLICY

# The built-in policies, by CLI name.
BUILTIN_POLICIES = {p.name: p for p in (PI0_POLICY, DM0_POLICY)}


def __getattr__(name: str) -> Any:
    """``dexrl.models.load_policy``, where it once was: deprecated, the public API has it."""
    if name != "load_policy":
        raise AttributeError(f"module 'dexrl.models' has no attribute {name!r}")
    warnings.warn("dexrl.models.load_policy is deprecated; use `from dexrl import load_policy`",
                  DeprecationWarning, stacklevel=2)
    return dexrl.load_policy
