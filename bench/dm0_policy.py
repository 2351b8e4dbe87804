"""RLinf DM0 adapter throughput: rollout calls and one PPO training micro-batch, with FLOP rates.

Run by hand: ``.venv/bin/python bench/dm0_policy.py`` (CPU, tiny random checkpoint, a few seconds
per case) or ``bench/dm0_policy.py --full`` (GPU only: DM0 at an assumed real size with random
weights, bf16 with DM0's fp32-kept weights). Rows and references are those of
``bench/pi0_policy.py``: ``predict_action_batch`` against the deterministic ``Dm0Policy.predict``
at the same batch and step count, and the training forward+backward against a no-grad forward of
the same micro-batch. FLOPs are analytic (matmuls, convolutions and attention scores at the lengths
actually computed: two 728 px views, the masked third view is skipped; prompt 200 tokens).

The vision tower dominates: the header prints its FLOPs per image and its share of the prefix
pass and of a rollout call.

**Assumed real sizes** (Dexbotic's config.json does not describe the tower, and the LLM/expert
widths are not verifiable offline; ModelZoo states 2.4 B parameters): PE-Lang-L/14 @ 728 (23
layers, width 1024, 16 heads, MLP ×4) with downsamplers to 13×13×4096 per image; ``linear4x``
projector without bias; a Qwen3-1.7B-shaped LLM (28 layers, width 2048, MLP 6144, 16 heads, 8 KV
heads, head_dim 128, vocabulary 151,936) and a Qwen3-0.6B-shaped expert (width 1024, MLP 3072,
same depth and heads, no embeddings). These sizes give 2.56 B parameters, more than ModelZoo's
2.4 B, so at least one real width is smaller: treat the real-size FLOPs and times as estimates.
By this count the tower costs 2.31 TFLOP per 728 px image (1.57 of it in its weight matmuls, the
rest in attention scores over 2,705 tokens), about three quarters of the prefix pass.
"""

from __future__ import annotations

import math
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

from dexrl.bridge.policies.dm0 import Dm0RLPolicy
from dexrl.checkpoints.policy import load_policy
from dexrl.models.dm0.config import PROJECTOR_TYPE, VISION_TOWER, Dm0Config
from dexrl.models.dm0.network import Dm0Network, Dm0RMSNorm
from dexrl.models.dm0.policy import Dm0Policy
from dexrl.models.dm0.tiny import FOREIGN_PROCESSOR_PATH, write_qwen_tokenizer, write_tiny_dm0
from dexrl.models.dm0.tokenization import Dm0PromptTokenizer
from dexrl.models.dm0.vision import LayerScale, PeVisionConfig
from dexrl.models.images import ImagePreprocessor
from dexrl.models.pi0.tiny import dexbotic_config
from dexrl.models.tiny_files import write_norm_stats
from dexrl.models.transforms import NormStats

PROMPT_LENGTH = 200  # Dexbotic's DM0 training prompt length (conf/model/dexbotic_dm0.yaml)
LAYER_SCALE_INIT = 0.1  # PE's LayerScale initial value


# ---------------------------------------------------------------- models
def real_dm0_raw() -> dict[str, Any]:
    """The ``config.json`` of a DM0 at the assumed real sizes (see the module docstring), in
    Dexbotic's layout (no ``vision_config``: the loader's default tower, PE-Lang-L/14 @ 728)."""
    def qwen3(hidden: int, mlp: int) -> dict[str, Any]:
        tower = CONFIG_MAPPING["qwen3"](
            vocab_size=151936, hidden_size=hidden, intermediate_size=mlp, num_hidden_layers=28,
            num_attention_heads=16, num_key_value_heads=8, head_dim=128, rope_theta=1e6,
            tie_word_embeddings=False,
        ).to_dict()
        tower.pop("dtype", None)
        return {**tower, "torch_dtype": "bfloat16"}

    return dexbotic_config("dexbotic_dm0", "DM0ForCausalLM", qwen3(2048, 6144),
                           qwen3(1024, 3072), {
        "processor_config": FOREIGN_PROCESSOR_PATH, "mm_vision_tower": VISION_TOWER,
        "mm_projector_type": PROJECTOR_TYPE, "action_dim": 32, "chunk_size": 50,
        "bf16": True, "chat_template": "step", "init_llm_weights": False,
        "torch_dtype": "bfloat16", "use_cache": False})


def real_dm0_config() -> Dm0Config:
    """DM0 at the assumed real sizes (:func:`real_dm0_raw`)."""
    return Dm0Config.from_dict(real_dm0_raw(), source="bench: assumed real DM0 sizes")


def random_policy(
    config: Dm0Config, dtype: torch.dtype, device: torch.device, workdir: Path
) -> Dm0Policy:
    """DM0 with random weights built on the meta device, materialized on ``device`` in ``dtype``
    except the weights DM0 keeps in float32 (as the loader does)."""
    network = random_network(lambda: Dm0Network(config), dtype, device,
                             (nn.LayerNorm, Dm0RMSNorm))
    with torch.no_grad():
        for module in network.modules():
            if isinstance(module, LayerScale):
                module.gamma.fill_(LAYER_SCALE_INIT)
        for name, param in network.named_parameters():
            if Dm0Policy.keeps_float32(name):
                param.data = param.data.float()
    network.init_buffers(device)
    write_qwen_tokenizer(workdir, model_max_length=PROMPT_LENGTH)
    write_norm_stats(workdir, 0)
    size = config.vision.image_size
    return Dm0Policy(network.eval(), Dm0PromptTokenizer.from_checkpoint(workdir),
                     ImagePreprocessor(size=(size, size)),
                     NormStats.from_file(workdir / "norm_stats.json"))


def tiny_policy(workdir: Path, dtype: torch.dtype) -> Dm0Policy:
    """The tests' tiny random checkpoint, with DM0's chunk of 50 actions."""
    return load_policy(write_tiny_dm0(workdir / "tiny", chunk_size=50), dtype=dtype)


# ---------------------------------------------------------------- FLOPs
def _downsampled(grid: int) -> tuple[int, int]:
    """Grid sides after the first and the second 3×3 stride-2 conv (padding 1)."""
    first = math.ceil(grid / 2)
    return first, math.ceil(first / 2)


def image_tokens(vis: PeVisionConfig) -> int:
    """LLM tokens per image (169 at 728 px)."""
    return _downsampled(vis.grid)[1] ** 2


def vision_flops(vis: PeVisionConfig) -> float:
    """Per image: conv stem, the ViT blocks over CLS + patches, and both downsampling convs."""
    grid, width = vis.grid, vis.width
    tokens = 1 + grid**2
    mlp = int(width * vis.mlp_ratio)
    stem = 2.0 * grid**2 * 3 * vis.patch_size**2 * width
    block = 2.0 * tokens * (4 * width**2 + 2 * width * mlp) + 4.0 * tokens**2 * width
    first, second = _downsampled(grid)
    down = 2.0 * 9 * (first**2 * width * 2 * width + second**2 * 2 * width * 4 * width)
    return stem + vis.layers * block + down


def prefix_tokens(config: Dm0Config, text_len: int) -> int:
    """Prefix length the network runs: two image views plus the padded prompt."""
    return VIEWS * image_tokens(config.vision) + text_len


def prefix_flops(config: Dm0Config, text_len: int) -> float:
    """Per sample: the PE tower on two views, the linear4x projector, the LLM prefix pass."""
    vis = config.vision
    projector = 2.0 * VIEWS * image_tokens(vis) * vis.out_width * config.llm.hidden_size
    length = prefix_tokens(config, text_len)
    llm = config.llm.num_hidden_layers * decoder_layer_flops(length, length, config.llm)
    return VIEWS * vision_flops(vis) + projector + llm


def suffix_flops(config: Dm0Config, text_len: int) -> float:
    """Per sample and denoising step: action/time projections and the expert over the action
    tokens (DM0 has no state token)."""
    width, chunk, dim = config.expert.hidden_size, config.chunk_size, config.action_dim
    keys = prefix_tokens(config, text_len) + chunk
    expert = config.expert.num_hidden_layers * decoder_layer_flops(chunk, keys, config.expert)
    return expert + action_projection_flops(width, chunk, dim)


def main() -> None:
    """Build the policy, print sizes and the vision share, then the rollout and training tables."""
    args = parse_args(__doc__, "assumed real DM0 size on a CUDA GPU (bf16)")
    require_cuda(args.full, "real DM0 is about 2.4 B parameters")
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        policy = (random_policy(real_dm0_config(), torch.bfloat16, torch.device("cuda"),
                                Path(tmp)) if args.full
                  else tiny_policy(Path(tmp), args.dtype))
    config = policy.network.config
    text_len = policy.tokenizer.model_max_length
    flops = Flops(prefix_flops(config, text_len), suffix_flops(config, text_len))
    vision = VIEWS * vision_flops(config.vision)
    steps = args.steps[0]
    print(f"vision tower (PE + downsamplers): {vision_flops(config.vision):.3e} FLOP per image; "
          f"{vision / flops.prefix:.1%} of the prefix pass, "
          f"{vision / (flops.prefix + steps * flops.suffix):.1%} of a rollout call with "
          f"N={steps} steps")
    run(args, "DM0", Dm0RLPolicy, policy, prefix_tokens(config, text_len), flops)


if __name__ == "__main__":
    main()
