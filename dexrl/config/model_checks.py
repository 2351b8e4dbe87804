"""The built-in models' config checks (their ``ModelSpec.check_config``), run by ``validate`` and
``train``. They live here, not in their model packages, because they read the typed settings
(:mod:`dexrl.config.settings`), which the model packages cannot import; a plugin's check takes
the config the same way (``function(cfg) -> list[Finding]``)."""

from __future__ import annotations

from omegaconf import DictConfig

from dexrl.config.settings import given, settings_of
from dexrl.errors import Finding

# Actions DM0 executes per chunk according to RLinf's Dexbotic docs and its model/dexbotic_dm0.yaml
# (the model's trajectory length); RLinf's DM0 PPO configs, and dexrl's, set 5.
DM0_DOCUMENTED_CHUNKS = 10


def check_dm0_settings(cfg: DictConfig) -> list[Finding]:
    """What is known about DM0's settings (DM0's ``ModelSpec.check_config``)."""
    findings: list[Finding] = []
    model = settings_of(cfg).actor.model
    chunks = model.num_action_chunks
    if chunks != DM0_DOCUMENTED_CHUNKS:
        findings.append(Finding(
            "warning", "actor.model.num_action_chunks",
            f"{chunks} differs from DM0's documented {DM0_DOCUMENTED_CHUNKS}: RLinf's Dexbotic "
            f"docs and model/dexbotic_dm0.yaml say DM0 uses {DM0_DOCUMENTED_CHUNKS}, while "
            "RLinf's libero_spatial_ppo_dexbotic_dm0.yaml ships 5 (dexrl's default follows it)",
            f"keep it to reproduce RLinf's DM0 PPO recipe, or set "
            f"actor.model.num_action_chunks={DM0_DOCUMENTED_CHUNKS} to act as DM0 is evaluated "
            "(env max steps must stay divisible by it)", code="dm0-chunks-undocumented"))
    precision = str(model.precision)
    if precision in ("bf16", "bfloat16") and not given(model.dexbotic.train_expert_only, True):
        findings.append(Finding(
            "error", "actor.model.dexbotic.train_expert_only",
            "full DM0 fine-tuning in bf16 cannot be sharded by FSDP: DM0 keeps its vision stem "
            "and position embedding in fp32 next to bf16 weights of the same module",
            "keep actor.model.dexbotic.train_expert_only=true, or set actor.model.precision=fp32 "
            "(with actor.fsdp_config.mixed_precision.param_dtype=bf16 for bf16 compute)",
            code="dm0-bf16-full-fine-tuning"))
    return findings
