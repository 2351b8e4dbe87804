"""What the RLinf adapter benchmarks (``pi0_policy.py``, ``dm0_policy.py``) share.

Observations, random real-size weights, analytic FLOPs of the MoT decoder, timing against a
reference measured in the same run, the result table, the rollout and training cases, and the
command line. A model's script supplies its policy and its prefix/suffix FLOP counts.
"""

from __future__ import annotations

import argparse
import dataclasses
import resource
import statistics
import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import torch
from _cost import (
    bench_global_step,
    gpu_busy,
    print_compiled_proxies,
    print_proxies,
    without_prefix_reuse,
)
from torch import nn

from dexrl.bridge.policies.chain import RLSettings
from dexrl.bridge.policies.flow import FlowRLPolicy
from dexrl.models.flow.policy import FlowPolicy

ENV_FRAME = 256  # LIBERO camera frames
VIEWS = 2  # main + wrist; the zero-pad view is masked and skipped
TASKS = ("pick up the black bowl between the plate and the ramekin and place it on the plate",
         "open the top drawer and put the bowl inside", "turn on the stove")


def env_obs(batch: int, seed: int = 0) -> dict[str, Any]:
    """Random LIBERO-shaped observations."""
    rng = np.random.default_rng(seed)
    frames = (batch, ENV_FRAME, ENV_FRAME, 3)
    return {"main_images": rng.integers(0, 256, frames, dtype=np.uint8),
            "wrist_images": rng.integers(0, 256, frames, dtype=np.uint8),
            "states": rng.normal(size=(batch, 8)),
            "task_descriptions": [TASKS[i % len(TASKS)] for i in range(batch)]}


# ---------------------------------------------------------------- models
def random_network(
    build: Callable[[], nn.Module],
    dtype: torch.dtype,
    device: torch.device,
    unit_weights: tuple[type[nn.Module], ...],
) -> nn.Module:
    """A network built on the meta device, then materialized on ``device`` with random weights:
    N(0, 0.02) matrices, zero vectors, except weights of ``unit_weights`` modules (norms whose
    weight multiplies the output), which are ones. Call ``init_buffers`` afterwards."""
    with torch.device("meta"):
        network = build().to(dtype)
    network.to_empty(device=device)
    generator = torch.Generator(device).manual_seed(0)
    with torch.no_grad():
        for module in network.modules():
            for name, param in module.named_parameters(recurse=False):
                if isinstance(module, unit_weights) and name == "weight":
                    param.fill_(1.0)
                elif param.ndim >= 2:
                    param.normal_(0.0, 0.02, generator=generator)
                else:
                    param.zero_()
    return network


# ---------------------------------------------------------------- FLOPs
def decoder_layer_flops(tokens: int, keys: int, cfg: Any) -> float:
    """One decoder layer over ``tokens`` queries attending to ``keys`` keys (2 FLOPs per MAC)."""
    width, heads, kv, head_dim = (cfg.hidden_size, cfg.num_attention_heads,
                                  cfg.num_key_value_heads, cfg.head_dim)
    projections = 2 * width * heads * head_dim + 2 * width * kv * head_dim
    mlp = 3 * width * cfg.intermediate_size
    return 2.0 * tokens * (projections + mlp) + 4.0 * tokens * keys * heads * head_dim


def action_projection_flops(width: int, chunk: int, dim: int) -> float:
    """Per sample and step: action in/out projections and the two time-mixing layers."""
    return 2.0 * chunk * (dim * width + 3 * width**2 + width * dim)


# ---------------------------------------------------------------- timing
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
              f"{self.unit + '/s':>10}{'peak GB':>9}{'vs ref':>9}{'GPU busy':>10}")

    def row(self, name: str, seconds: float, batch: int, flops: float, peak: float,
            ref: float, busy: float | None = None) -> None:
        """One case, with its time relative to the reference ``ref`` seconds and the share of
        the wall time the GPU ran kernels (``-`` without CUDA)."""
        shown = "-" if busy is None else f"{busy:.0%}"
        print(f"{name:<34}{batch:>6}{seconds * 1e3:>11.1f}{batch / seconds:>11.1f}"
              f"{flops / self.scale:>11.2f}{flops / seconds / self.scale:>10.2f}{peak:>9.2f}"
              f"{seconds / ref:>8.2f}x{shown:>10}")


@dataclasses.dataclass(frozen=True)
class Flops:
    """Analytic FLOPs per sample: the prefix pass (vision included) and one denoising step."""

    prefix: float
    suffix: float


def bench_rollout(table: Table, adapter: FlowRLPolicy, batches: Iterable[int],
                  steps: Iterable[int], repeats: int, flops: Flops) -> None:
    """predict_action_batch (train mode) against the deterministic predict, same batch/steps."""
    policy = adapter.flow
    for num_steps in steps:
        adapter.settings = dataclasses.replace(adapter.settings, num_steps=num_steps)
        for batch in batches:
            obs = env_obs(batch)
            total = batch * (flops.prefix + num_steps * flops.suffix)
            def rollout(o: dict = obs) -> Any:
                return adapter.predict_action_batch(o, mode="train")

            (ref, ref_peak), (secs, peak) = measure_pair(
                lambda o=obs, n=num_steps: policy.predict(o, num_steps=n), rollout, repeats)
            table.row(f"predict (ODE reference) N={num_steps}", ref, batch, total, ref_peak, ref)
            table.row(f"predict_action_batch N={num_steps}", secs, batch, total, peak, ref,
                      gpu_busy(rollout, secs))


def bench_training(table: Table, adapter: FlowRLPolicy, batch: int, num_steps: int,
                   repeats: int, flops: Flops) -> None:
    """One micro-batch: forward + backward (train mode) against a no-grad forward."""
    adapter.settings = dataclasses.replace(adapter.settings, num_steps=num_steps)
    torch.manual_seed(1)
    inputs = adapter.predict_action_batch(env_obs(batch), mode="train")[1]["forward_inputs"]
    extra_value_pass = bool((inputs["denoise_inds"][:, 0] != 0).any())  # k = 0 reuses it
    fwd = batch * (flops.prefix + (1 + extra_value_pass) * flops.suffix)
    # Backward ≈ 2x the forward of the part with a graph: the scored suffix pass only (the
    # prefix is frozen, the critic input detached).
    fwd_bwd = fwd + batch * 2 * flops.suffix
    adapter.train()

    def step() -> None:
        out = adapter(forward_inputs=inputs, compute_values=True)
        (out["logprobs"].sum() + out["values"].sum()).backward()
        adapter.zero_grad(set_to_none=True)

    def forward_only() -> None:
        with torch.no_grad():
            adapter(forward_inputs=inputs, compute_values=True)

    with without_prefix_reuse(adapter):  # a micro-batch as the first epoch computes it
        (ref, ref_peak), (secs, peak) = measure_pair(forward_only, step, repeats)
        busy = gpu_busy(step, secs)
    table.row(f"train forward, no grad N={num_steps}", ref, batch, fwd, ref_peak, ref)
    table.row(f"train forward+backward N={num_steps}", secs, batch, fwd_bwd, peak, ref, busy)
    adapter.eval()


# ---------------------------------------------------------------- command line
def parse_args(doc: str | None, full_help: str) -> argparse.Namespace:
    """The benchmarks' shared flags."""
    parser = argparse.ArgumentParser(description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true", help=full_help)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8, 16, 64])
    parser.add_argument("--steps", type=int, nargs="+", default=[4, 10])
    parser.add_argument("--train-batch", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--update-epochs", type=int, default=4, help="PPO epochs of the global "
                        "step case (shipped: 4)")
    parser.add_argument("--step-micro-batches", type=int, default=2, help="micro-batches of "
                        "--train-batch samples in the global step case")
    parser.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32", help="weights of "
                        "the tiny checkpoint (without --full)")
    parser.add_argument("--proxies-only", action="store_true", help="print only the CPU "
                        "proxies and the global step case")
    parser.add_argument("--compiled-proxies", action="store_true", help="also compile the "
                        "rollout (inductor, about a minute per batch size on a CPU) and print "
                        "eager vs compiled aten ops per call, graphs, breaks, recompilations "
                        "(the eager, compiled and graphed GPU rows: bench/gpu_bench.py)")
    args = parser.parse_args()
    args.dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[args.dtype]
    return args


def require_cuda(full: bool, what: str) -> None:
    """Exit with a clear message when ``--full`` is asked for without a CUDA GPU."""
    if full and not torch.cuda.is_available():
        raise SystemExit(f"error: --full needs a CUDA GPU ({what}); "
                         "hint: run without --full for the tiny CPU benchmark")


def run(args: argparse.Namespace, label: str, adapter_class: type[FlowRLPolicy],
        policy: FlowPolicy, prefix_tokens: int, flops: Flops) -> None:
    """Wrap ``policy`` as an adapter, print its sizes, then the rollout and training tables."""
    settings = RLSettings(num_steps=args.steps[0], num_action_chunks=5, train_expert_only=True,
                          detach_critic_input=True, norm_mode=policy.norm_mode)
    adapter = adapter_class(policy, settings).eval()
    total = sum(p.numel() for p in adapter.parameters())
    trainable = sum(p.numel() for p in adapter.parameters() if p.requires_grad)
    dtype = adapter.model.action_out_proj.weight.dtype
    print(f"{label} {'real size' if args.full else 'tiny'} on {policy.device} ({dtype}); "
          f"parameters {total:,} total, {trainable:,} trainable ({trainable / total:.1%}); "
          f"prefix {prefix_tokens} tokens, chunk {policy.network.config.chunk_size}")
    print_proxies(adapter, env_obs, args.batches)
    if args.compiled_proxies:
        print_compiled_proxies(adapter, env_obs, args.batches)
    bench_global_step(adapter, env_obs, args.train_batch, args.step_micro_batches,
                      args.update_epochs, args.repeats)
    if args.proxies_only:
        return
    table = Table("TFLOP", 1e12) if args.full else Table("GFLOP", 1e9)
    table.header()
    bench_rollout(table, adapter, args.batches, args.steps, args.repeats, flops)
    bench_training(table, adapter, args.train_batch, args.steps[0], args.repeats, flops)
    if not torch.cuda.is_available():
        print("GPU rows (GPU busy, real-size rollout at batches 1/8/16/64, training micro-batch "
              "and global step in bf16): ready to measure, no CUDA here; run with --full on a "
              "CUDA GPU")
