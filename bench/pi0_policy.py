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

import argparse
import dataclasses
import resource
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import CONFIG_MAPPING

from dexrl.bridge.pi0_policy import Pi0RLPolicy
from dexrl.bridge.rl_steps import RLSettings
from dexrl.models import load_policy
from dexrl.models.images import ImagePreprocessor
from dexrl.models.pi0.config import Pi0Config
from dexrl.models.pi0.network import Pi0Network
from dexrl.models.pi0.policy import Pi0Policy
from dexrl.models.tokenization import Pi0PromptTokenizer
from dexrl.models.transforms import NormStats
from dexrl.testing.checkpoints import write_tiny_pi0
from dexrl.testing.files import (
    write_norm_stats,
    write_preprocessor_config,
    write_sentencepiece_tokenizer,
)

ENV_FRAME = 256  # LIBERO camera frames
VIEWS = 2  # main + wrist; the zero-pad view is masked and skipped
TASKS = ("pick up the black bowl between the plate and the ramekin and place it on the plate",
         "open the top drawer and put the bowl inside", "turn on the stove")


# ---------------------------------------------------------------- models
def real_pi0_config() -> Pi0Config:
    """π0's real sizes (SigLIP so400m/14@224, Gemma-2B, Gemma-300M-shaped expert)."""
    def gemma(hidden: int, mlp: int) -> dict[str, Any]:
        return CONFIG_MAPPING["gemma"](
            vocab_size=257152, hidden_size=hidden, intermediate_size=mlp, num_hidden_layers=18,
            num_attention_heads=8, num_key_value_heads=1, head_dim=256,
            hidden_activation="gelu_pytorch_tanh",
        ).to_dict()

    vision = CONFIG_MAPPING["siglip_vision_model"](
        hidden_size=1152, intermediate_size=4304, num_hidden_layers=27, num_attention_heads=16,
        image_size=224, patch_size=14, vision_use_head=False,
    ).to_dict()
    return Pi0Config.from_dict({
        "model_type": "dexbotic_pi0", "llm_config": gemma(2048, 16384),
        "action_config": gemma(1024, 4096), "vision_config": vision,
        "mm_projector_type": "mlp2x_gelu", "action_dim": 32, "chunk_size": 50,
    }, source="bench: real π0 sizes")


def random_policy(
    config: Pi0Config, dtype: torch.dtype, device: torch.device, workdir: Path
) -> Pi0Policy:
    """π0 with random weights built on the meta device, then materialized on ``device``."""
    with torch.device("meta"):
        network = Pi0Network(config).to(dtype)
    network.to_empty(device=device)
    generator = torch.Generator(device).manual_seed(0)
    with torch.no_grad():
        for module in network.modules():
            for name, param in module.named_parameters(recurse=False):
                if isinstance(module, torch.nn.LayerNorm) and name == "weight":
                    param.fill_(1.0)
                elif param.ndim >= 2:
                    param.normal_(0.0, 0.02, generator=generator)
                else:
                    param.zero_()
    network.init_buffers(device)
    write_sentencepiece_tokenizer(workdir, model_max_length=48)
    write_preprocessor_config(workdir, image_size=config.vision.image_size)
    write_norm_stats(workdir, 0)
    return Pi0Policy(network.eval(), Pi0PromptTokenizer.from_checkpoint(workdir),
                     ImagePreprocessor.from_checkpoint(workdir),
                     NormStats.from_file(workdir / "norm_stats.json"))


def tiny_policy(workdir: Path) -> Pi0Policy:
    """The tests' tiny random checkpoint, with π0's chunk of 50 actions."""
    return load_policy(write_tiny_pi0(workdir / "tiny", chunk_size=50))


# ---------------------------------------------------------------- FLOPs
def _decoder_layer_flops(tokens: int, keys: int, cfg: Any) -> float:
    """One Gemma layer over ``tokens`` queries attending to ``keys`` keys (2 FLOPs per MAC)."""
    width, heads, kv, head_dim = (cfg.hidden_size, cfg.num_attention_heads,
                                  cfg.num_key_value_heads, cfg.head_dim)
    projections = 2 * width * heads * head_dim + 2 * width * kv * head_dim
    mlp = 3 * width * cfg.intermediate_size
    return 2.0 * tokens * (projections + mlp) + 4.0 * tokens * keys * heads * head_dim


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
    llm = config.llm.num_hidden_layers * _decoder_layer_flops(length, length, config.llm)
    return vision + projector + llm


def suffix_flops(config: Pi0Config, text_len: int) -> float:
    """Per sample and denoising step: state/action/time projections and the expert pass."""
    width, chunk, dim = config.expert.hidden_size, config.chunk_size, config.action_dim
    tokens = 1 + chunk
    keys = prefix_tokens(config, text_len) + tokens
    expert = config.expert.num_hidden_layers * _decoder_layer_flops(tokens, keys, config.expert)
    projections = 2.0 * (dim * width + chunk * (dim * width + 3 * width**2 + width * dim))
    return expert + projections


# ---------------------------------------------------------------- timing
def env_obs(batch: int, seed: int = 0) -> dict[str, Any]:
    """Random LIBERO-shaped observations."""
    rng = np.random.default_rng(seed)
    frames = (batch, ENV_FRAME, ENV_FRAME, 3)
    return {"main_images": rng.integers(0, 256, frames, dtype=np.uint8),
            "wrist_images": rng.integers(0, 256, frames, dtype=np.uint8),
            "states": rng.normal(size=(batch, 8)),
            "task_descriptions": [TASKS[i % len(TASKS)] for i in range(batch)]}


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _peak_gb() -> float:
    """GPU allocator peak since the last reset; on the CPU the process's peak RSS so far."""
    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 1e9
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # KiB on Linux


def measure_pair(
    reference: Callable[[], Any], candidate: Callable[[], Any], repeats: int
) -> tuple[tuple[float, float], tuple[float, float]]:
    """(median seconds, peak GB) of both callables after one warm-up each.

    Calls alternate so that load from other processes hits both alike (the ratio is what counts).
    """
    times: dict[int, list[float]] = {0: [], 1: []}
    peaks = {0: 0.0, 1: 0.0}
    reference()
    candidate()
    for _ in range(repeats):
        for index, fn in enumerate((reference, candidate)):
            _sync()
            if torch.cuda.is_available():
                torch.cuda.reset_peak_memory_stats()
            start = time.perf_counter()
            fn()
            _sync()
            times[index].append(time.perf_counter() - start)
            peaks[index] = max(peaks[index], _peak_gb())
    return ((statistics.median(times[0]), peaks[0]), (statistics.median(times[1]), peaks[1]))


@dataclasses.dataclass(frozen=True)
class Table:
    """Prints rows; FLOPs in GFLOP (tiny) or TFLOP (real size)."""

    unit: str
    scale: float

    def header(self) -> None:
        """Column titles."""
        print(f"{'case':<34}{'batch':>6}{'ms':>11}{'samples/s':>11}{self.unit:>11}"
              f"{self.unit + '/s':>10}{'peak GB':>9}{'vs ref':>9}")

    def row(self, name: str, seconds: float, batch: int, flops: float, peak: float,
            ref: float) -> None:
        """One case, with its time relative to the reference ``ref`` seconds."""
        print(f"{name:<34}{batch:>6}{seconds * 1e3:>11.1f}{batch / seconds:>11.1f}"
              f"{flops / self.scale:>11.2f}{flops / seconds / self.scale:>10.2f}{peak:>9.2f}"
              f"{seconds / ref:>8.2f}x")


def bench_rollout(table: Table, adapter: Pi0RLPolicy, policy: Pi0Policy, batches: list[int],
                  steps: list[int], repeats: int, text_len: int) -> None:
    """predict_action_batch (train mode) against the deterministic predict, same batch/steps."""
    config = policy.network.config
    for num_steps in steps:
        adapter.settings = dataclasses.replace(adapter.settings, num_steps=num_steps)
        for batch in batches:
            obs = env_obs(batch)
            flops = batch * (prefix_flops(config, text_len)
                             + num_steps * suffix_flops(config, text_len))
            (ref, ref_peak), (secs, peak) = measure_pair(
                lambda o=obs, n=num_steps: policy.predict(o, num_steps=n),
                lambda o=obs: adapter.predict_action_batch(o, mode="train"), repeats)
            table.row(f"predict (ODE reference) N={num_steps}", ref, batch, flops, ref_peak, ref)
            table.row(f"predict_action_batch N={num_steps}", secs, batch, flops, peak, ref)


def bench_training(table: Table, adapter: Pi0RLPolicy, batch: int, num_steps: int,
                   repeats: int, text_len: int) -> None:
    """One micro-batch: forward + backward (train mode) against a no-grad forward."""
    config = adapter.pi0.network.config
    adapter.settings = dataclasses.replace(adapter.settings, num_steps=num_steps)
    torch.manual_seed(1)
    inputs = adapter.predict_action_batch(env_obs(batch), mode="train")[1]["forward_inputs"]
    extra_value_pass = bool((inputs["denoise_inds"][:, 0] != 0).any())  # k = 0 reuses it
    prefix, suffix = prefix_flops(config, text_len), suffix_flops(config, text_len)
    fwd = batch * (prefix + (1 + extra_value_pass) * suffix)
    # Backward ≈ 2x the forward of the part with a graph: the scored suffix pass only (the
    # prefix is frozen, the critic input detached).
    fwd_bwd = fwd + batch * 2 * suffix
    adapter.train()

    def step() -> None:
        out = adapter(forward_inputs=inputs, compute_values=True)
        (out["logprobs"].sum() + out["values"].sum()).backward()
        adapter.zero_grad(set_to_none=True)

    def forward_only() -> None:
        with torch.no_grad():
            adapter(forward_inputs=inputs, compute_values=True)

    (ref, ref_peak), (secs, peak) = measure_pair(forward_only, step, repeats)
    table.row(f"train forward, no grad N={num_steps}", ref, batch, fwd, ref_peak, ref)
    table.row(f"train forward+backward N={num_steps}", secs, batch, fwd_bwd, peak, ref)
    adapter.eval()


def main() -> None:
    """Build the policy, print parameter counts, then the rollout and training tables."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true", help="real π0 size on a CUDA GPU (bf16)")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--steps", type=int, nargs="+", default=[4, 10])
    parser.add_argument("--train-batch", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.full and not torch.cuda.is_available():
        raise SystemExit("error: --full needs a CUDA GPU (real π0 is 3.24 B parameters); "
                         "hint: run without --full for the tiny CPU benchmark")
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        policy = (random_policy(real_pi0_config(), torch.bfloat16, torch.device("cuda"),
                                Path(tmp)) if args.full else tiny_policy(Path(tmp)))
    settings = RLSettings(num_steps=args.steps[0], num_action_chunks=5,
                          train_expert_only=True, detach_critic_input=True)
    adapter = Pi0RLPolicy(policy, settings).eval()
    total = sum(p.numel() for p in adapter.parameters())
    trainable = sum(p.numel() for p in adapter.parameters() if p.requires_grad)
    dtype = next(adapter.parameters()).dtype
    device = policy.device
    text_len = policy.tokenizer.model_max_length
    config = policy.network.config
    print(f"π0 {'real size' if args.full else 'tiny'} on {device} ({dtype}); parameters "
          f"{total:,} total, {trainable:,} trainable ({trainable / total:.1%}); "
          f"prefix {prefix_tokens(config, text_len)} tokens, chunk {config.chunk_size}")
    table = Table("TFLOP", 1e12) if args.full else Table("GFLOP", 1e9)
    table.header()
    bench_rollout(table, adapter, policy, args.batches, args.steps, args.repeats, text_len)
    bench_training(table, adapter, args.train_batch, args.steps[0], args.repeats, text_len)


if __name__ == "__main__":
    main()
