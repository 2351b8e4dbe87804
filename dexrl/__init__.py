"""dexrl: RL post-training of Dexbotic policies.

The stable Python API is what this package exports (:data:`__all__`); a name here keeps working
when the module behind it moves (``tests/repository/test_public_api.py`` holds it to that)::

    from dexrl import load_policy

    policy = load_policy("~/.cache/dexrl/checkpoints/Dexmal/libero-db-pi0")

Names resolve on first use (PEP 562), so ``import dexrl`` and ``dexrl --help`` import nothing
heavy. The table below is resolved by name: it is the one place where dexrl imports upward, as
every other unit ranks above this package (tests/repository/test_layering.py).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# Public name -> the module that defines it.
_PUBLIC = {
    "load_policy": "dexrl.checkpoints.policy",
    "load_eval_policy": "dexrl.checkpoints.policy",
    "resolve_checkpoint": "dexrl.checkpoints.sources",
    "checkpoint_model_type": "dexrl.checkpoints.verify",
    "DexrlError": "dexrl.errors",
}
__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'dexrl' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})
