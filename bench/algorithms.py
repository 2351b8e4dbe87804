"""What each algorithm and noise method costs a training micro-batch and a rollout call.

Run by hand: ``.venv/bin/python bench/algorithms.py`` (CPU: the tiny π0 and DM0 with π0's chunk
of 50 actions, 10 denoising steps) or ``--full`` (a CUDA GPU: π0 and DM0 at their real sizes,
random weights, bf16). Every variant is the adapter built with RLinf's settings for it, on the same
observations, alternated with the PPO reference in the same run (the ratio is what counts):

- ``ppo``: GAE's value head, values computed in training (``compute_values``), one random scored
  denoising step (``flow_sde``);
- ``grpo``: no value head, no values;
- ``ppo+flow_noise`` and ``grpo+flow_noise``: the learned noise head, every step noisy and scored
  (``joint_logprob``).

Printed per variant: trainable parameters, the median time of a training micro-batch
(forward and backward, as RLinf's actor runs it) and of a rollout call, and the memory the
micro-batch's backward holds: on the CPU the bytes of the tensors
autograd saves for backward (what differs between the variants; the weights are the same); on a
GPU the allocator's peak above what was allocated before the call (weights and caches excluded).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from _light_rlinf import light_rlinf

light_rlinf()

from _common import env_obs  # noqa: E402
from _cost import without_prefix_reuse  # noqa: E402

from dexrl.bridge.policies.chain import RLSettings  # noqa: E402
from dexrl.bridge.policies.dm0 import Dm0RLPolicy  # noqa: E402
from dexrl.bridge.policies.flow import FlowRLPolicy  # noqa: E402
from dexrl.bridge.policies.pi0 import Pi0RLPolicy  # noqa: E402

VARIANTS = {
    "ppo": {"add_value_head": True},
    "grpo": {"add_value_head": False},
    "ppo+flow_noise": {"add_value_head": True, "noise_method": "flow_noise",
                       "joint_logprob": True},
    "grpo+flow_noise": {"add_value_head": False, "noise_method": "flow_noise",
                        "joint_logprob": True},
}


def saved_bytes(fn: Callable[[], torch.Tensor]) -> tuple[torch.Tensor, int]:
    """``fn()``'s output and the bytes of the tensors autograd saved for its backward."""
    total = 0

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        nonlocal total
        total += tensor.numel() * tensor.element_size()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    return out, total


class Case:
    """One variant's adapter, inputs and timed calls."""

    def __init__(self, adapter: FlowRLPolicy, values: bool, batch: int) -> None:
        torch.manual_seed(1)
        self.adapter, self.values = adapter, values
        self.obs = env_obs(batch)
        self.inputs = adapter.predict_action_batch(self.obs, mode="train")[1]["forward_inputs"]
        self.times: dict[str, list[float]] = {"train": [], "rollout": []}
        self.peak_mb = 0.0

    def loss(self) -> torch.Tensor:
        out = self.adapter(forward_inputs=self.inputs, compute_values=self.values)
        total = out["logprobs"].sum()
        return total + out["values"].sum() if self.values else total

    def train(self) -> None:
        self.loss().backward()
        self.adapter.zero_grad(set_to_none=True)

    def rollout(self) -> None:
        self.adapter.predict_action_batch(self.obs, mode="train")

    def saved_mb(self) -> float:
        """MB of the tensors autograd saves for the micro-batch's backward."""
        return saved_bytes(self.loss)[1] / 1e6

    def timed(self, name: str) -> None:
        """One call of ``name`` (train or rollout), timed; on a GPU its allocator peak too."""
        cuda = torch.cuda.is_available()
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            resident = torch.cuda.memory_allocated()
        start = time.perf_counter()
        getattr(self, name)()
        if cuda:
            torch.cuda.synchronize()
            if name == "train":
                grown = torch.cuda.max_memory_allocated() - resident
                self.peak_mb = max(self.peak_mb, grown / 1e6)
        self.times[name].append(time.perf_counter() - start)


def measure(cases: dict[str, Case], repeats: int) -> dict[str, dict[str, float]]:
    """Median seconds per call and memory of every case; the calls alternate between the cases
    (a warm-up round first), so that the machine's load touches each alike."""
    for case in cases.values():
        case.adapter.train()
    with contextlib.ExitStack() as stack:
        for case in cases.values():
            stack.enter_context(without_prefix_reuse(case.adapter))
        memory = {name: case.saved_mb() for name, case in cases.items()}
        for _ in range(repeats + 1):
            for case in cases.values():
                case.timed("train")
                case.timed("rollout")
    return {name: {"train_s": statistics.median(case.times["train"][1:]),
                   "rollout_s": statistics.median(case.times["rollout"][1:]),
                   "memory_mb": case.peak_mb if torch.cuda.is_available() else memory[name]}
            for name, case in cases.items()}


def adapters(model: str, full: bool, workdir: Path) -> Callable[[dict], FlowRLPolicy]:
    """A builder of fresh adapters (one shared network) for each variant's settings."""
    if model == "pi0":
        from pi0_policy import random_policy, real_pi0_config, tiny_policy

        cls: type[FlowRLPolicy] = Pi0RLPolicy
        policy = (random_policy(real_pi0_config(), torch.bfloat16, torch.device("cuda"),
                                workdir) if full else tiny_policy(workdir, torch.float32))
    else:
        from dm0_policy import random_policy, real_dm0_config, tiny_policy

        cls = Dm0RLPolicy
        policy = (random_policy(real_dm0_config(), torch.bfloat16, torch.device("cuda"),
                                workdir) if full else tiny_policy(workdir, torch.float32))

    def build(extra: dict) -> FlowRLPolicy:
        settings = RLSettings(num_steps=10, num_action_chunks=5, train_expert_only=True,
                              detach_critic_input=True, norm_mode=policy.norm_mode, **extra)
        return cls(policy, settings)

    return build


def report(model: str, args: argparse.Namespace) -> None:
    """Measure and print every variant of ``model``."""
    with tempfile.TemporaryDirectory() as tmp:
        build = adapters(model, args.full, Path(tmp))
        cases = {name: Case(build(extra), extra["add_value_head"], args.batch)
                 for name, extra in VARIANTS.items()}
        measured = measure(cases, args.repeats)
        ref = measured["ppo"]
        for name, m in measured.items():
            trainable = sum(p.numel() for p in cases[name].adapter.parameters()
                            if p.requires_grad)
            print(f"{model:5} {name:16} {trainable:>10,} {m['train_s'] * 1e3:>9.1f} "
                  f"{m['train_s'] / ref['train_s']:>6.2f}x {m['rollout_s'] * 1e3:>10.1f} "
                  f"{m['rollout_s'] / ref['rollout_s']:>6.2f}x {m['memory_mb']:>11.1f} "
                  f"{m['memory_mb'] / ref['memory_mb']:>6.2f}x", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true",
                        help="real sizes (random weights, bf16) on a CUDA GPU")
    parser.add_argument("--models", nargs="+", choices=("pi0", "dm0"), default=["pi0", "dm0"])
    parser.add_argument("--batch", type=int, default=16, help="micro-batch and rollout batch")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if args.full and not torch.cuda.is_available():
        raise SystemExit("error: --full needs a CUDA GPU; hint: run without --full")
    print(f"{'model':5} {'variant':16} {'trainable':>10} {'train ms':>9} {'vs ppo':>7} "
          f"{'rollout ms':>10} {'vs ppo':>7} {'backward MB':>11}"
          f" {'vs ppo':>7}")
    for model in args.models:
        try:
            report(model, args)
        except torch.OutOfMemoryError:
            print(f"{model:5} out of memory at batch {args.batch}: try --batch "
                  f"{max(1, args.batch // 2)}", flush=True)
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
