"""One command for the GPU rows of bench/README.md: π0 and DM0 rollout calls eager, compiled and
graphed, a training micro-batch with and without the prefix cache, and peak memory.

Run by hand on one CUDA GPU (real sizes, random weights, bf16; on an H100 each compiled batch
size takes 1–2.5 minutes to compile, so split a short GPU session with ``--models``,
``--engines`` and ``--batches``):

    python3 bench/gpu_bench.py --json gpu-bench.json

It prints one markdown table and writes the same rows as JSON. Each rollout row is the median of
``--repeats`` calls of ``predict_action_batch`` in train mode (N=4 denoising steps), with the GPU
busy share (summed CUDA kernel time over wall time), the peak memory, its time relative to the
eager call of the same batch in this run, and the largest difference of its actions and log-probs
from the eager call's with the same seed. ``compiled`` is ``rollout.enable_torch_compile`` (mode
``--compile-mode``; its first call per batch size, the compilation, is timed apart), ``graphed``
is ``rollout.enable_cuda_graph`` (capture timed apart), ``compiled+graphed`` both. A time budget
(``--budget``) skips what would not fit and says so.

Without CUDA it runs the tiny checkpoints in fp32 on the CPU: eager and compiled rows (the
capture proxies: compiled graphs, graph breaks and recompilations), and says what it skips.

A bare machine with torch and numpy needs the wheels bench/README.md lists; where Ray is
missing, RLinf's two modules the adapters use (its policy base class and CUDA-graph manager) are
imported without RLinf's package ``__init__`` files, which import Ray.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch

ENGINES = ("eager", "compiled", "graphed", "compiled+graphed")
NUM_STEPS = 4
TRAIN_BATCH = 32
TRAIN_EPOCHS = 4


sys.path.insert(0, str(Path(__file__).resolve().parent))
from _light_rlinf import light_rlinf  # noqa: E402

light_rlinf()

from _common import env_obs  # noqa: E402
from _cost import global_step, gpu_busy, training_batch, without_prefix_reuse  # noqa: E402
from torch._dynamo.utils import counters  # noqa: E402

from dexrl.bridge.policies.chain import RLSettings  # noqa: E402
from dexrl.bridge.policies.flow import FlowRLPolicy  # noqa: E402


class Budget:
    """Wall-clock budget of the whole run; what would start after it is skipped."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds
        self.skipped: list[str] = []

    def allows(self, what: str, need: float = 0.0) -> bool:
        """Whether ``what`` may start (``need`` seconds must be left); records a skip."""
        if time.monotonic() + need <= self.end:
            return True
        self.skipped.append(f"{what}: time budget")
        return False


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _peak_reset() -> None:
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()


def _peak_gb() -> float | None:
    return torch.cuda.max_memory_allocated() / 1e9 if torch.cuda.is_available() else None


def call(adapter: FlowRLPolicy, batch: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One train-mode rollout call from a fixed seed: (actions, log-probs) on the CPU."""
    torch.manual_seed(seed)
    actions, result = adapter.predict_action_batch(env_obs(batch, seed), mode="train")
    return actions.float(), result["prev_logprobs"].float().cpu()


def timed(fn: Callable[[], Any], repeats: int) -> float:
    """Median wall seconds of ``repeats`` calls."""
    times = []
    for _ in range(repeats):
        _sync()
        start = time.perf_counter()
        fn()
        _sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


class Engines:
    """The adapter's rollout switched between the engines through its public hooks.

    The compiled rows and the compiled+graphed rows share one compiled rollout, as a run that
    sets both keys does (RLinf compiles first, then captures).
    """

    def __init__(self, adapter: FlowRLPolicy, mode: str, backend: str) -> None:
        self.adapter = adapter
        self.mode = mode
        self.backend = backend
        self.compiled: Any = None

    def use(self, engine: str) -> None:
        """Make ``engine`` the adapter's rollout path."""
        adapter = self.adapter
        adapter.release_cuda_graph()
        adapter._fast = None  # eager
        if "compiled" in engine:
            if self.compiled is None:
                adapter._fast_rollout().enable_compile(self.mode, self.backend)
                self.compiled = adapter._fast
            adapter._fast = self.compiled

    def close(self) -> None:
        """Back to eager, graphs released."""
        self.adapter.release_cuda_graph()
        self.adapter._fast = None


def rollout_rows(label: str, engines: Engines, names: list[str], args: argparse.Namespace,
                 budget: Budget, reference: dict[int, Any]) -> list[dict[str, Any]]:
    """Each engine of ``names`` at every batch: time, GPU busy, peak, ratio and parity against
    the eager call of the same batch and seed (``reference``, filled by the eager rows)."""
    rows: list[dict[str, Any]] = []
    adapter = engines.adapter
    cuda = torch.cuda.is_available()
    for engine in names:
        if "graphed" in engine and not cuda:
            budget.skipped.append(f"{label} {engine}: no CUDA (a CUDA graph needs a GPU)")
            continue
        if not budget.allows(f"{label} {engine}", need=20.0):
            continue
        engines.use(engine)
        before = sum(counters["recompiles"].values()), counters["stats"]["unique_graphs"]
        for batch in args.batches:
            if not budget.allows(f"{label} {engine} batch {batch}"):
                continue
            _peak_reset()
            start = time.perf_counter()
            if "graphed" in engine:
                adapter.capture_cuda_graph(batch, batch)
            out = call(adapter, batch, seed=batch)  # compiles and/or captures this batch
            first = time.perf_counter() - start
            seconds = timed(lambda b=batch: call(adapter, b, seed=b), args.repeats)
            busy = gpu_busy(lambda b=batch: call(adapter, b, seed=b), seconds)
            if engine == "eager":
                reference[batch] = (seconds, out)
            ref_seconds, ref_out = reference.get(batch, (float("nan"), out))
            graphs = adapter._fast.graphs if adapter._fast is not None else None
            rows.append({
                "model": label, "case": f"rollout {engine}", "batch": batch,
                "ms": seconds * 1e3, "first_call_s": first,
                "gpu_busy": busy, "peak_gb": _peak_gb(),
                "vs_eager": seconds / ref_seconds,
                "max_diff_actions": float((out[0] - ref_out[0]).abs().max()),
                "max_diff_logprobs": float((out[1] - ref_out[1]).abs().max()),
                "graph_gb": graphs.held_bytes / 1e9 if graphs is not None else None,
            })
            print(_line(rows[-1]), flush=True)
        if "compiled" in engine and rows:
            rows[-1]["compile_counters"] = {
                "graphs_compiled": counters["stats"]["unique_graphs"] - before[1],
                "graph_breaks": sum(counters["graph_break"].values()),
                "recompiles": sum(counters["recompiles"].values()) - before[0],
            }
    engines.close()
    return rows


def train_rows(label: str, adapter: FlowRLPolicy, budget: Budget) -> list[dict[str, Any]]:
    """One micro-batch's forward+backward, recomputing the prefix vs reusing it from the cache
    (``update_epoch`` passes over one micro-batch; the reuse arm computes the prefix once)."""
    rows = []
    if not budget.allows(f"{label} training micro-batch", need=30.0):
        return rows
    batches = training_batch(adapter, env_obs, TRAIN_BATCH, 1)
    step = iter(range(1_000_000))
    for arm in ("recompute", "prefix cache"):
        times = []
        for _ in range(3):  # the first warms up
            _peak_reset()
            with nullcontext() if arm == "prefix cache" else without_prefix_reuse(adapter):
                _sync()
                start = time.perf_counter()
                global_step(adapter, batches, TRAIN_EPOCHS, next(step))
                _sync()
                times.append((time.perf_counter() - start) / TRAIN_EPOCHS)
        rows.append({"model": label, "case": f"train micro-batch, {arm}", "batch": TRAIN_BATCH,
                     "ms": statistics.median(times[1:]) * 1e3, "peak_gb": _peak_gb()})
        print(_line(rows[-1]), flush=True)
    return rows


def model_rows(label: str, adapter: FlowRLPolicy, args: argparse.Namespace,
               budget: Budget) -> list[dict[str, Any]]:
    """One model's rows: eager and graphed first (cheap), training, then the compiled engines;
    a part that fails is reported and the others still run."""
    engines = Engines(adapter, args.compile_mode, args.compile_backend)
    reference: dict[int, Any] = {}
    first = [e for e in args.engines if "compiled" not in e]
    rest = [e for e in args.engines if "compiled" in e]
    parts: list[tuple[str, Callable[[], list[dict[str, Any]]]]] = [
        (f"{label} {', '.join(first)}",
         lambda: rollout_rows(label, engines, first, args, budget, reference))]
    if not args.no_train:
        parts.append((f"{label} training", lambda: train_rows(label, adapter, budget)))
    parts.append((f"{label} {', '.join(rest)}",
                  lambda: rollout_rows(label, engines, rest, args, budget, reference)))
    rows: list[dict[str, Any]] = []
    for what, part in parts:
        try:
            rows += part()
        except Exception as exc:  # one failing part must not cost the other rows
            traceback.print_exc()
            budget.skipped.append(f"{what}: failed ({type(exc).__name__}: {exc})")
            engines.close()
    return rows


def build(label: str, full: bool, workdir: Path) -> FlowRLPolicy:
    """The model's adapter: real size in bf16 on the GPU, or the tiny checkpoint in fp32."""
    if label == "pi0":
        import pi0_policy as bench

        from dexrl.bridge.policies.pi0 import Pi0RLPolicy as adapter_class
        config = bench.real_pi0_config
    else:
        import dm0_policy as bench

        from dexrl.bridge.policies.dm0 import Dm0RLPolicy as adapter_class
        config = bench.real_dm0_config
    torch.manual_seed(0)
    policy = (bench.random_policy(config(), torch.bfloat16, torch.device("cuda"), workdir)
              if full else bench.tiny_policy(workdir, torch.float32))
    settings = RLSettings(num_steps=NUM_STEPS, num_action_chunks=5, train_expert_only=True,
                          detach_critic_input=True, norm_mode=policy.norm_mode)
    return adapter_class(policy, settings).eval()


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _line(row: dict[str, Any]) -> str:
    busy = row.get("gpu_busy")
    cells = [row["model"], row["case"], str(row["batch"]), _fmt(row["ms"], ".1f"),
             _fmt(row.get("first_call_s"), ".1f"), "-" if busy is None else f"{busy:.0%}",
             _fmt(row.get("peak_gb"), ".2f"), _fmt(row.get("graph_gb"), ".2f"),
             _fmt(row.get("vs_eager"), ".2f"), _fmt(row.get("max_diff_actions"), ".1e"),
             _fmt(row.get("max_diff_logprobs"), ".1e")]
    return "| " + " | ".join(cells) + " |"


HEADER = ("| model | case | batch | ms | first call s | GPU busy | peak GB | graphs GB | vs eager "
          "| max Δ actions | max Δ log-probs |\n|---|---|---|---|---|---|---|---|---|---|---|")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; returns the JSON document it writes."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", choices=("pi0", "dm0"), default=["pi0", "dm0"])
    parser.add_argument("--engines", nargs="+", choices=ENGINES, default=list(ENGINES))
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--compile-mode", default="default",
                        help="torch.compile mode of the compiled rows (RLinf's own default, "
                        "max-autotune-no-cudagraphs, autotunes every matmul: minutes more)")
    parser.add_argument("--compile-backend", default="inductor",
                        help="inductor; aot_eager traces without code generation (quick tests)")
    parser.add_argument("--no-train", action="store_true", help="skip the training rows")
    parser.add_argument("--budget", type=float, default=450.0, help="seconds for the whole run")
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args(argv)
    budget = Budget(args.budget)
    full = torch.cuda.is_available()
    device = torch.cuda.get_device_name() if full else "CPU (tiny checkpoints, fp32)"
    print(f"device: {device}; torch {torch.__version__}; N={NUM_STEPS}; compile mode "
          f"{args.compile_mode} ({args.compile_backend})", flush=True)
    if not full:
        budget.skipped.append("real sizes, bf16, GPU busy and memory: no CUDA (tiny "
                              "checkpoints in fp32 on the CPU instead)")
    print(HEADER, flush=True)
    rows: list[dict[str, Any]] = []
    start = time.monotonic()
    for index, label in enumerate(args.models):
        # Each model gets its share of the budget, so a slow compilation of one leaves the
        # other's rows.
        budget.end = start + args.budget * (index + 1) / len(args.models)
        if not budget.allows(f"{label}: every row", need=60.0):
            continue
        with tempfile.TemporaryDirectory() as tmp:
            adapter = build(label, full, Path(tmp))
        rows += model_rows(label, adapter, args, budget)
        del adapter
        torch._dynamo.reset()  # its caches hold the compiled model's objects
        gc.collect()
        if full:
            torch.cuda.empty_cache()
    document = {"schema": "dexrl.gpu-bench/1", "device": device, "torch": torch.__version__,
                "num_steps": NUM_STEPS, "compile_mode": args.compile_mode,
                "compile_backend": args.compile_backend, "rows": rows,
                "skipped": budget.skipped}
    print("\n" + HEADER)
    for row in rows:
        print(_line(row))
    for skip in budget.skipped:
        print(f"skipped: {skip}")
    if args.json:
        args.json.write_text(json.dumps(document, indent=1))
        print(f"json: {args.json}")
    return document


if __name__ == "__main__":
    main()
