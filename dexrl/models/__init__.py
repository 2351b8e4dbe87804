"""Dexbotic π0 and DM0: one package per model (config, network, loader, policy, tokenization,
its checks, its catalog entry ``spec`` and its tiny-checkpoint writer ``tiny``), what they share
in ``flow/``, checkpoint-folder files and weights. No rlinf imports here; importing the package is
cheap. Loading a checkpoint of any model: :mod:`dexrl.checkpoints.policy`.
"""

from __future__ import annotations

from dexrl.models.dm0.spec import POLICY as DM0_POLICY
from dexrl.models.pi0.spec import POLICY as PI0_POLICY

# The built-in policies, by CLI name.
BUILTIN_POLICIES = {p.name: p for p in (PI0_POLICY, DM0_POLICY)}
