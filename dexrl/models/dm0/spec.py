"""Dexbotic DM0 as dexrl declares it: the catalog entry (:data:`POLICY`) and what dexrl knows
about its checkpoints (:data:`MODEL`). The code it refers to is in this package (imported when
used); the RLinf adapter is :mod:`dexrl.bridge.policies.dm0`.
"""

from __future__ import annotations

from typing import Any

from dexrl.specs import BUILTIN_TASKS, LIBERO_SUITES, ModelSpec, Policy


def _extra_keys() -> tuple[str, ...]:
    from dexrl.models.dm0.config import ALLOWED_EXTRA_KEYS

    return ALLOWED_EXTRA_KEYS


def _inference() -> type:
    from dexrl.models.dm0.policy import Dm0Policy

    return Dm0Policy


def _smoke_checkpoint() -> Any:
    from dexrl.models.dm0.tiny import write_tiny_dm0

    return write_tiny_dm0


# Prefix keys/values per sample (the sizes bench/dm0_policy.py assumes):
# 28 × 2 × 8 × 128 × (2·169 + 200) × 2 bytes.
MODEL = ModelSpec(
    tokenizer_files=(("vocab.json",), ("merges.txt",), ("tokenizer_config.json",)),
    norm_stats=True, params=(2.4e9, 0.45e9), prefix_kv_bytes=28 * 2 * 8 * 128 * 538 * 2,
    # H100 bf16 (docs/performance.md#memory-plans): a training micro-batch of 32 peaked at
    # 15.8 GB, an eager rollout call of 64 at 14.5 GB, with 4.8 GB of weights; the graphs of a
    # batch of 8 held 10.28 GB.
    memory_gb_per_sample=((15.8 - 4.8) / 32, (14.5 - 4.8) / 64, 10.28 / 8),
    extra_keys=_extra_keys,
    # in the config package, which reads the typed settings (models cannot import it)
    check_config="dexrl.config.model_checks:check_dm0_settings",
    inference=_inference,
)

# dexbotic_dm0 is also an RLinf built-in, which dexrl's registration replaces.
POLICY = Policy("dm0", "dexbotic_dm0", "Dexbotic DM0: PE ViT-L/14@728 + Qwen3 with a Qwen3 expert",
                template="dexbotic_dm0", model=MODEL, suites=(*LIBERO_SUITES, *BUILTIN_TASKS),
                smoke_checkpoint=_smoke_checkpoint)
