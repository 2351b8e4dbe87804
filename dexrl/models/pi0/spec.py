"""Dexbotic π0 as dexrl declares it: the catalog entry (:data:`POLICY`) and what dexrl knows
about its checkpoints (:data:`MODEL`). The code it refers to is in this package (imported when
used); the RLinf adapter is :mod:`dexrl.bridge.policies.pi0`.
"""

from __future__ import annotations

from typing import Any

from dexrl.models.pi0.checks import check_pi0_tensors
from dexrl.specs import BUILTIN_TASKS, LIBERO_SUITES, ModelSpec, Policy


def _extra_keys() -> tuple[str, ...]:
    from dexrl.models.pi0.config import ALLOWED_EXTRA_KEYS

    return ALLOWED_EXTRA_KEYS


def _check_tensors() -> Any:
    return check_pi0_tensors


def _inference() -> type:
    from dexrl.models.pi0.policy import Pi0Policy

    return Pi0Policy


def _smoke_checkpoint() -> Any:
    from dexrl.models.pi0.tiny import write_tiny_pi0

    return write_tiny_pi0


# The figures follow the memory budget in the model notes (3.24 B parameters, ≈314 M trainable
# with train_expert_only). Prefix keys/values per sample: layers × 2 × KV heads × head_dim ×
# prefix tokens × 2 bytes = 18 × 2 × 1 × 256 × (2·256 + 48) × 2.
MODEL = ModelSpec(
    tokenizer_files=(("tokenizer.model",), ("tokenizer_config.json",)),
    preprocessor=True, norm_stats=True, params=(3.24e9, 0.314e9),
    prefix_kv_bytes=18 * 2 * 1 * 256 * 560 * 2,
    # H100 bf16 (docs/performance.md#memory-plans): a training micro-batch of 32 peaked at
    # 10.1 GB with 6.48 GB of weights; the graphs of a batch of 8 held 2.77 GB; a rollout
    # sample's activations are not measured (DM0's per prefix byte, scaled).
    memory_gb_per_sample=((10.1 - 6.48) / 32, 0.025, 2.77 / 8),
    extra_keys=_extra_keys,
    check_tensors=_check_tensors,
    inference=_inference,
)

POLICY = Policy("pi0", "dexbotic_pi0", "Dexbotic π0: SigLIP + Gemma-2B with a Gemma action expert",
                model=MODEL, suites=(*LIBERO_SUITES, *BUILTIN_TASKS),
                smoke_checkpoint=_smoke_checkpoint)
