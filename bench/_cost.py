"""What the adapter benchmarks measure besides wall time: the CPU proxies of GPU cost, the GPU's
busy share, and one PPO global step's training cost with and without the prefix reuse.

- :func:`op_counts`: aten ops dispatched by one call, and its ``aten::to``/``aten::copy_`` calls
  (torch.profiler's CPU events, nested ops included), proxies for kernel launches and dtype
  churn that need no GPU.
- :func:`gpu_busy`: summed CUDA kernel time of one call over its wall time (CUDA only).
- :func:`bench_global_step`: PPO epochs over micro-batches as RLinf's actor runs them, timed with
  the training prefix cache and without it, counting prefix passes per sample.

Only the adapter's public calls are used (plus ``set_global_step``/``prefix_store`` where they
exist), so the same script measures older revisions of dexrl too.
"""

from __future__ import annotations

import collections
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

from dexrl.bridge.policies.flow import FlowRLPolicy


def op_counts(fn: Callable[[], Any]) -> dict[str, int]:
    """``{"ops", "to", "copy_"}``: aten ops, ``aten::to`` and ``aten::copy_`` calls of ``fn()``."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    names = collections.Counter(event.name for event in prof.events())
    return {"ops": sum(n for name, n in names.items() if name.startswith("aten::")),
            "to": names["aten::to"], "copy_": names["aten::copy_"]}


def gpu_busy(fn: Callable[[], Any], wall: float) -> float | None:
    """Summed CUDA kernel seconds of one ``fn()`` over ``wall`` (its unprofiled median time);
    None without CUDA."""
    if not torch.cuda.is_available():
        return None
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    kernel_us = sum(event.self_device_time_total for event in prof.events()
                    if event.device_type == torch.autograd.DeviceType.CUDA)
    return kernel_us / 1e6 / wall


@contextmanager
def counting_prefix_rows(adapter: FlowRLPolicy) -> Iterator[list[int]]:
    """Count the rows that go through the network's prefix pass (one entry per pass)."""
    network = adapter.flow.network
    encode = network.encode_prefix
    rows: list[int] = []

    def counted(obs: Any, **kwargs: Any) -> Any:
        rows.append(int(obs.tokens.shape[0]))
        return encode(obs, **kwargs)

    network.encode_prefix = counted
    try:
        yield rows
    finally:
        del network.encode_prefix


@contextmanager
def without_prefix_reuse(adapter: FlowRLPolicy) -> Iterator[None]:
    """The recomputing path: the adapter's prefix store (where it has one) set aside."""
    store = getattr(adapter, "prefix_store", None)
    if store is not None:
        adapter.prefix_store = None
    try:
        yield
    finally:
        if store is not None:
            adapter.prefix_store = store


def training_batch(adapter: FlowRLPolicy, obs: Callable[[int, int], dict], micro: int,
                   micro_batches: int) -> list[dict[str, torch.Tensor]]:
    """``micro_batches`` rollout calls of ``micro`` rows: the forward inputs of one step."""
    batches = []
    for seed in range(micro_batches):
        torch.manual_seed(seed)
        result = adapter.predict_action_batch(obs(micro, seed), mode="train")[1]
        batches.append(result["forward_inputs"])
    return batches


def global_step(adapter: FlowRLPolicy, micro_batches: list[dict[str, torch.Tensor]],
                epochs: int, step: int) -> None:
    """RLinf's training round: the step hook, then per epoch forward+backward per micro-batch."""
    if hasattr(adapter, "set_global_step"):
        adapter.set_global_step(step)
    adapter.train()
    for _ in range(epochs):
        for inputs in micro_batches:
            out = adapter(forward_inputs=inputs, compute_values=True)
            (out["logprobs"].sum() + out["values"].sum()).backward()
            adapter.zero_grad(set_to_none=True)
    if hasattr(adapter, "release_prefix_cache"):
        adapter.release_prefix_cache()
    adapter.eval()


def bench_global_step(adapter: FlowRLPolicy, obs: Callable[[int, int], dict], micro: int,
                      micro_batches: int, epochs: int, repeats: int) -> None:
    """Print one global step's training cost per sample, recomputing vs reusing the prefix
    (alternating, medians of ``repeats``), and prefix passes per sample of each."""
    batches = training_batch(adapter, obs, micro, micro_batches)
    samples = micro * micro_batches
    # Without CUDA: the process's CPU time, which other processes' load on a shared machine
    # disturbs far less than wall time.
    clock, unit = ((time.perf_counter, "ms/sample") if torch.cuda.is_available() else
                   (time.process_time, "CPU ms/sample"))
    times: dict[str, list[float]] = {"recompute": [], "reuse": []}
    passes: dict[str, float] = {}
    counter = iter(range(1_000_000))
    for index in range(repeats + 1):  # the first round warms up
        for name in times:
            reuse = name == "reuse"
            with counting_prefix_rows(adapter) as rows, \
                    (nullcontext() if reuse else without_prefix_reuse(adapter)):
                start = clock()
                global_step(adapter, batches, epochs, next(counter))
                _sync()
                elapsed = clock() - start
            passes[name] = sum(rows) / samples
            if index:
                times[name].append(elapsed)
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(f"global step: {epochs} epochs × {micro_batches} micro-batches of {micro} "
          f"(fwd+bwd), median of {repeats}")
    for name in times:
        print(f"  {name:<10} {medians[name] * 1e3 / samples:9.2f} {unit}   prefix passes "
              f"per sample {passes[name]:.2f}")
    print(f"  reuse/recompute (optimized/eager) {medians['reuse'] / medians['recompute']:.2f}x")


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def print_proxies(adapter: FlowRLPolicy, obs: Callable[[int, int], dict],
                  batches: list[int]) -> None:
    """Per rollout call: aten ops dispatched, aten::to and aten::copy_ calls (CPU proxies)."""
    print(f"{'rollout call (proxies)':<34}{'batch':>6}{'aten ops':>10}{'aten::to':>10}"
          f"{'copy_':>8}")
    for batch in batches:
        inputs = obs(batch, 0)
        adapter.predict_action_batch(inputs, mode="train")
        counts = op_counts(lambda i=inputs: adapter.predict_action_batch(i, mode="train"))
        print(f"{'predict_action_batch':<34}{batch:>6}{counts['ops']:>10}{counts['to']:>10}"
              f"{counts['copy_']:>8}")


def print_compiled_proxies(adapter: FlowRLPolicy, obs: Callable[[int, int], dict],
                           batches: list[int], backend: str = "inductor") -> None:
    """Eager against compiled rollout calls (``rollout.enable_torch_compile``): aten ops
    dispatched per call (what the compiled code still dispatches; kernel launches on a GPU),
    then graphs compiled, graph breaks and recompilations over all batches and a second call
    each. Needs a dexrl with ``enable_torch_compile`` (issue 29)."""
    from torch._dynamo.utils import counters

    if not hasattr(adapter, "_fast_rollout"):
        print("compiled rollout: not in this revision of dexrl")
        return
    eager = {batch: op_counts(lambda b=batch: adapter.predict_action_batch(obs(b, 0),
                                                                          mode="train"))
             for batch in batches}
    torch._dynamo.reset()
    counters.clear()
    adapter._fast_rollout().enable_compile("default", backend)
    print(f"{'rollout call, eager vs compiled':<34}{'batch':>6}{'eager ops':>11}"
          f"{'compiled':>10}")
    for batch in batches:
        for mode in ("train", "eval"):  # compiles at the first call of a batch size
            adapter.predict_action_batch(obs(batch, 1), mode=mode)
        ops = op_counts(lambda b=batch: adapter.predict_action_batch(obs(b, 0), mode="train"))
        print(f"{'predict_action_batch':<34}{batch:>6}{eager[batch]['ops']:>11}{ops['ops']:>10}")
    print(f"  {backend}: {counters['stats']['unique_graphs']} graphs compiled for "
          f"{len(batches)} batch size(s), {sum(counters['graph_break'].values())} graph "
          f"breaks, {sum(counters['recompiles'].values())} recompilations")
    adapter.release_cuda_graph()
    adapter._fast = None
    torch._dynamo.reset()
