"""RLinf π0 adapter throughput: rollout calls and one PPO training micro-batch, with FLOP rates.

Run by hand: ``.venv/bin/python bench/pi0_policy.py`` (CPU, tiny random checkpoint, a few seconds
per case) or ``bench/pi0_policy.py --full`` (GPU only: the real π0 size with random weights,
≈3.24 B parameters, bf16). Every row prints a ratio against a reference measured in the same run:
``predict_action_batch`` against the plain deterministic ``Pi0Policy.predict`` at the same batch
and step count, and the training forward+backward against a no-grad forward of the same
micro-batch. FLOPs are counted analytically from the config (matmuls and attention scores at the
lengths actually computed: two image views, the masked third view is skipped).

Targets on one H100, bf16, real size: a rollout call at batch 64 with 4 steps ≤ 0.5 s (≥ 45 % of
the 790 TFLOP/s dense peak); a training micro-batch of 32 with ``train_expert_only`` ≤ 32 GB peak.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import torch
from _common import (
    VIEWS,
    Flops,
    action_projection_flops,
    decoder_layer_flops,
    parse_args,
    random_network,
    require_cuda,
    run,
)
from torch import nn
from transformers import CONFIG_MAPPING

from dexrl.bridge.policies.pi0 import Pi0RLPolicy
from dexrl.checkpoints.policy import load_policy
from dexrl.models.images import ImagePreprocessor
from dexrl.models.pi0.config import Pi0Config
from dexrl.models.pi0.network import Pi0Network
from dexrl.models.pi0.policy import Pi0Policy
from dexrl.models.pi0.tiny import FOREIGN_PROCESSOR_PATH, dexbotic_config, write_tiny_pi0
from dexrl.models.pi0.tokenization import Pi0PromptTokenizer
from dexrl.models.tiny_files import (
    write_norm_stats,
    write_preprocessor_config,
    write_sentencepiece_tokenizer,
)
from dexrl.models.transforms import NormStats


# ---------------------------------------------------------------- models
def real_pi0_raw() -> dict[str, Any]:
    """The ``config.json`` of a π0 at its real sizes (SigLIP so400m/14@224, Gemma-2B,
    Gemma-300M-shaped expert), in Dexbotic's layout."""
    def gemma(hidden: int, mlp: int) -> dict[str, Any]:
        tower = CONFIG_MAPPING["gemma"](
            vocab_size=257152, hidden_size=hidden, intermediate_size=mlp, num_hidden_layers=18,
            num_attention_heads=8, num_key_value_heads=1, head_dim=256,
            hidden_act="gelu_pytorch_tanh", hidden_activation="gelu_pytorch_tanh",
        ).to_dict()
        tower.pop("dtype", None)
        return {**tower, "torch_dtype": "bfloat16"}

    vision = CONFIG_MAPPING["siglip_vision_model"](
        hidden_size=1152, intermediate_size=4304, num_hidden_layers=27, num_attention_heads=16,
        image_size=224, patch_size=14, vision_use_head=False,
    ).to_dict()
    vision.pop("dtype", None)
    return dexbotic_config("dexbotic_pi0", "Pi0ForCausalLM", gemma(2048, 16384),
                           gemma(1024, 4096), {
        "vision_config": {**vision, "torch_dtype": "bfloat16"},
        "processor_config": FOREIGN_PROCESSOR_PATH, "mm_projector_type": "mlp2x_gelu",
        "mm_hidden_size": 1152, "mm_vision_tower": None, "action_dim": 32, "chunk_size": 50,
        "chat_template": "dexbotic", "init_llm_weights": False, "torch_dtype": "bfloat16",
        "use_cache": False})


def real_pi0_config() -> Pi0Config:
    """π0's real sizes (:func:`real_pi0_raw`)."""
    return Pi0Config.from_dict(real_pi0_raw(), source="bench: real π0 sizes")


def random_policy(
    config: Pi0Config, dtype: torch.dtype, device: torch.device, workdir: Path
) -> Pi0Policy:
    """π0 with random weights built on the meta device, then materialized on ``device``."""
    # Gemma's RMSNorm scales by (1 + weight), so its zero weight is already neutral.
    network = random_network(lambda: Pi0Network(config), dtype, device, (nn.LayerNorm,))
    network.init_buffers(device)
    write_sentencepiece_tokenizer(workdir, model_max_length=48)
    write_preprocessor_config(workdir, image_size=config.vision.image_size)
    write_norm_stats(workdir, 0)
    return Pi0Policy(network.eval(), Pi0PromptTokenizer.from_checkpoint(workdir),
                     ImagePreprocessor.from_checkpoint(workdir),
                     NormStats.from_file(workdir / "norm_stats.json"))


def tiny_policy(workdir: Path, dtype: torch.dtype) -> Pi0Policy:
    """The tests' tiny random checkpoint, with π0's chunk of 50 actions."""
    return load_policy(write_tiny_pi0(workdir / "tiny", chunk_size=50), dtype=dtype)


# ---------------------------------------------------------------- FLOPs
def prefix_tokens(config: Pi0Config, text_len: int) -> int:
    """Prefix length the network runs: two image views plus the padded prompt."""
    patches = (config.vision.image_size // config.vision.patch_size) ** 2
    return VIEWS * patches + text_len


def prefix_flops(config: Pi0Config, text_len: int) -> float:
    """Per sample: SigLIP on two views, the projector, and the LLM prefix pass."""
    vis = config.vision
    patches = (vis.image_size // vis.patch_size) ** 2
    vis_layer = (2.0 * patches * (4 * vis.hidden_size**2 + 2 * vis.hidden_size
                                  * vis.intermediate_size) + 4.0 * patches**2 * vis.hidden_size)
    patch_embed = 2.0 * patches * 3 * vis.patch_size**2 * vis.hidden_size
    vision = VIEWS * (vis.num_hidden_layers * vis_layer + patch_embed)
    llm_width = config.llm.hidden_size
    mlp_proj = config.projector_type.startswith("mlp")
    projector = 2.0 * VIEWS * patches * (vis.hidden_size * llm_width
                                         + (llm_width**2 if mlp_proj else 0))
    length = prefix_tokens(config, text_len)
    llm = config.llm.num_hidden_layers * decoder_layer_flops(length, length, config.llm)
    return vision + projector + llm


def suffix_flops(config: Pi0Config, text_len: int) -> float:
    """Per sample and denoising step: state/action/time projections and the expert pass."""
    width, chunk, dim = config.expert.hidden_size, config.chunk_size, config.action_dim
    tokens = 1 + chunk
    keys = prefix_tokens(config, text_len) + tokens
    expert = config.expert.num_hidden_layers * decoder_layer_flops(tokens, keys, config.expert)
    return expert + 2.0 * dim * width + action_projection_flops(width, chunk, dim)


def main() -> None:
    """Build the policy, print parameter counts, then the rollout and training tables."""
    args = parse_args(__doc__, "real π0 size on a CUDA GPU (bf16)")
    require_cuda(args.full, "real π0 is 3.24 B parameters")
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        policy = (random_policy(real_pi0_config(), torch.bfloat16, torch.device("cuda"),
                                Path(tmp)) if args.full
                  else tiny_policy(Path(tmp), args.dtype))
    config = policy.network.config
    text_len = policy.tokenizer.model_max_length
    run(args, "π0", Pi0RLPolicy, policy, prefix_tokens(config, text_len),
        Flops(prefix_flops(config, text_len), suffix_flops(config, text_len)))


if __name__ == "__main__":
    main()
