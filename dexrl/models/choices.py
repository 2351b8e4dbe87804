"""Names the model and rollout code accepts, in a module without torch so that the config schema
(:mod:`dexrl.config.settings`) offers the same choices the code checks."""

from __future__ import annotations

NOISE_METHODS = ("flow_sde", "flow_cps", "flow_noise")
"""How scored denoising steps are sampled (:mod:`dexrl.bridge.policies.chain`)."""
NORM_MODES: tuple[str, ...] = ("mean_std", "quantile")
"""State/action normalizations of a checkpoint (:mod:`dexrl.models.transforms`)."""
ATTENTION = ("eager", "sdpa")
"""The MoT's shared attention implementations (:mod:`dexrl.models.flow.mot`): the eager reference,
and torch's scaled_dot_product_attention (fused kernels on CUDA; equal to float noise, not
bit-identical)."""
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
"""torch.compile's modes for the rollout (:mod:`dexrl.bridge.policies.fast_rollout`)."""
GRAPHING_MODES = ("reduce-overhead", "max-autotune")
"""Compile modes whose code records CUDA graphs itself (cudagraph trees): not inside a capture."""

__all__ = ["ATTENTION", "COMPILE_MODES", "GRAPHING_MODES", "NOISE_METHODS", "NORM_MODES"]
