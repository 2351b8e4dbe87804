"""``dexrl eval``'s fast policy call (``--torch-compile``, ``--cuda-graph``) on the CPU: the
padded batch sizes, actions equal to the inference policy's at every batch an evaluation has, no
compilation after the warm-up, and the refusals. Its CUDA-graph half runs in
``test_rollout_graphs.py``'s GPU tests' way (``gpu`` marker, below)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers.env_obs import random_env_obs
from torch._dynamo.utils import counters

from dexrl.bridge.policies.fast_eval import FastEvalPolicy, batch_buckets
from dexrl.checkpoints.policy import load_policy
from dexrl.errors import DexrlError
from dexrl.evaluation.request import EvalRequest
from dexrl.evaluation.settings import check_fast_path

STEPS, CHUNK = 4, 5


@pytest.mark.parametrize(("envs", "buckets"), [
    (1, [1]), (2, [1, 2]), (3, [1, 2, 3]), (10, [1, 3, 5, 10]), (64, [1, 16, 32, 64])])
def test_batch_buckets_are_few_and_cover_every_batch(envs: int, buckets: list[int]) -> None:
    assert batch_buckets(envs) == buckets


def _noise(policy, batch: int, seed: int) -> torch.Tensor:  # noqa: ANN001
    config = policy.network.config
    return torch.randn(batch, config.chunk_size, config.action_dim,
                       generator=torch.Generator().manual_seed(seed))


def _counts() -> tuple[int, int, int]:
    return (counters["stats"]["unique_graphs"], sum(counters["graph_break"].values()),
            sum(counters["recompiles"].values()))


@pytest.mark.parametrize("model", ["pi0", pytest.param("dm0", marks=pytest.mark.slow)])
def test_compiled_calls_equal_the_inference_policy_and_compile_only_in_warm_up(
        request: pytest.FixtureRequest, model: str) -> None:
    """aot_eager (dynamo and AOTAutograd, no code generation): the warm-up traces three graphs
    per padded batch size (1, 2, 4) without a break; then batches of an evaluation of 4 envs
    (4, then 3 padded to 4 as busy envs leave, 1) give the inference policy's actions for the
    same noise, and nothing compiles again."""
    ckpt = request.getfixturevalue("tiny_pi0_dir" if model == "pi0" else "tiny_dm0_dir")
    reference = load_policy(ckpt)
    fast = FastEvalPolicy(load_policy(ckpt), f"dexbotic_{model}", num_steps=STEPS,
                          action_chunk=CHUNK, num_envs=4, compile_mode="default",
                          compile_backend="aot_eager")
    torch._dynamo.reset()
    counters.clear()
    fast.warm_up()
    warmed = _counts()
    assert warmed[:2] == (3 * len(fast.buckets), 0)
    assert fast.buckets == [1, 2, 4]
    for batch in (4, 3, 1):
        obs, noise = random_env_obs(batch, batch), _noise(reference, batch, batch)
        want = reference.predict(obs, noise=noise, num_steps=STEPS, num_action_chunks=CHUNK)
        got = fast.predict(obs, noise=noise, num_steps=STEPS, num_action_chunks=CHUNK)
        assert got["actions"].shape == (batch, CHUNK, 7)
        torch.testing.assert_close(got["actions"], want["actions"], rtol=0, atol=1e-5)
    assert _counts() == warmed
    with pytest.raises(DexrlError) as err:
        fast.predict(random_env_obs(1, 0), noise=_noise(reference, 1, 0), num_steps=STEPS + 1,
                     num_action_chunks=CHUNK)
    assert err.value.code == "eval-fast-path-settings"
    torch._dynamo.reset()


@pytest.mark.parametrize(("model_type", "mode", "graphs", "device", "code"), [
    ("dexbotic_pi0", "fast", False, "cpu", "eval-compile-mode-unknown"),
    ("plugin_policy", "default", False, "cpu", "eval-fast-path-unsupported"),
    ("dexbotic_pi0", None, True, "cpu", "eval-cuda-graph-no-gpu"),
    ("dexbotic_dm0", "reduce-overhead", True, "cuda", "eval-compile-mode-graphs"),
    ("dexbotic_dm0", "max-autotune", True, "cuda:1", "eval-compile-mode-graphs"),
])
def test_fast_path_refusals(model_type: str, mode: str | None, graphs: bool, device: str,
                            code: str) -> None:
    request = EvalRequest(ckpt="x", suite="libero_spatial", torch_compile=mode, cuda_graph=graphs)
    with pytest.raises(DexrlError) as err:
        check_fast_path(request, model_type, device)
    assert err.value.code == code


@pytest.mark.parametrize(("mode", "graphs", "device"), [
    (None, False, "cpu"), ("default", False, "cpu"), ("max-autotune-no-cudagraphs", True, "cuda"),
    (None, True, "cuda:0")])
def test_fast_path_accepted(mode: str | None, graphs: bool, device: str) -> None:
    request = EvalRequest(ckpt="x", suite="libero_spatial", torch_compile=mode, cuda_graph=graphs)
    check_fast_path(request, "dexbotic_pi0", device)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a CUDA GPU")
def test_graphed_calls_equal_the_eager_adapter_call_on_a_gpu(tiny_pi0_dir: Path) -> None:
    """On a GPU the captured calls replay the eager adapter's kernels: actions equal the
    inference policy's to float rounding at every batch of 3 envs."""
    reference = load_policy(tiny_pi0_dir, device="cuda")
    fast = FastEvalPolicy(load_policy(tiny_pi0_dir, device="cuda"), "dexbotic_pi0",
                          num_steps=STEPS, action_chunk=CHUNK, num_envs=3, cuda_graph=True)
    fast.warm_up()
    assert fast.fast.graphs is not None and fast.fast.graphs.sizes == fast.buckets
    for batch in (3, 2, 1):
        obs, noise = random_env_obs(batch, batch), _noise(reference, batch, batch)
        want = reference.predict(obs, noise=noise, num_steps=STEPS, num_action_chunks=CHUNK)
        got = fast.predict(obs, noise=noise, num_steps=STEPS, num_action_chunks=CHUNK)
        torch.testing.assert_close(got["actions"], want["actions"], rtol=0, atol=1e-4)
