"""CUDA graphs of the rollout call (``rollout.enable_cuda_graph``): replay against eager on the
tiny π0 and DM0, in fp32 and bf16, after an in-place weight update, after release and recapture,
and the memory the graphs hold. All of it needs a CUDA GPU (the ``gpu`` marker)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers.env_obs import random_env_obs

from dexrl.bridge.policies.chain import RLSettings
from dexrl.bridge.policies.dm0 import Dm0RLPolicy
from dexrl.bridge.policies.flow import FlowRLPolicy
from dexrl.bridge.policies.pi0 import Pi0RLPolicy
from dexrl.checkpoints.policy import load_policy
from dexrl.errors import DexrlError

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
BATCH = 4
# bf16 noise of the tiny models' outputs (actions are denormalized: a few units)
TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 5e-2}




def _adapter(model: str, ckpt: Path, dtype: torch.dtype, **settings) -> FlowRLPolicy:
    cls = Pi0RLPolicy if model == "pi0" else Dm0RLPolicy
    rl = RLSettings(num_steps=4, num_action_chunks=5, **settings)
    return cls(load_policy(ckpt, device="cuda", dtype=dtype), rl).eval()


def _call(adapter: FlowRLPolicy, seed: int, mode: str = "train") -> list[torch.Tensor]:
    torch.manual_seed(seed)
    actions, result = adapter.predict_action_batch(random_env_obs(BATCH, seed), mode=mode)
    return [actions, result["prev_logprobs"].cpu(), result["prev_values"].cpu(),
            result["forward_inputs"]["chains_bits"].view(torch.float32).cpu()]


def _close(got: list[torch.Tensor], want: list[torch.Tensor], dtype: torch.dtype) -> None:
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a.float(), b.float(), rtol=0, atol=TOLERANCE[dtype])


def _pair(request: pytest.FixtureRequest, model: str, dtype: torch.dtype,
          **settings) -> tuple[FlowRLPolicy, FlowRLPolicy]:
    ckpt = request.getfixturevalue("tiny_pi0_dir" if model == "pi0" else "tiny_dm0_dir")
    eager = _adapter(model, ckpt, dtype, **settings)
    graphed = _adapter(model, ckpt, dtype, **settings)
    graphed.load_state_dict(eager.state_dict())
    graphed.capture_cuda_graph(BATCH, 2 * BATCH)
    return eager, graphed


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("model", ["pi0", "dm0"])
@pytest.mark.parametrize("method", ["flow_sde", "flow_cps"])
def test_replay_equals_eager(request: pytest.FixtureRequest, model: str, dtype: torch.dtype,
                             method: str) -> None:
    eager, graphed = _pair(request, model, dtype, noise_method=method, joint_logprob=True)
    assert graphed.is_cuda_graph_enabled() and graphed._fast.graphs.sizes == [BATCH, 2 * BATCH]
    for seed, mode in ((0, "train"), (1, "train"), (2, "eval")):
        _close(_call(graphed, seed, mode), _call(eager, seed, mode), dtype)
    # new noise at every call, the same noise from the same seed
    torch.manual_seed(5)
    obs = random_env_obs(BATCH, 5)
    first, second = (graphed.predict_action_batch(obs, mode="train")[1]["forward_inputs"]
                     ["chains_bits"] for _ in range(2))
    assert not torch.equal(first, second)
    assert torch.equal(_call(graphed, 5)[3], _call(graphed, 5)[3])


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("model", ["pi0", "dm0"])
def test_replay_after_an_in_place_weight_update(request: pytest.FixtureRequest,
                                                model: str) -> None:
    eager, graphed = _pair(request, model, torch.float32)
    before = _call(graphed, 0)
    generator = torch.Generator().manual_seed(3)
    update = {k: v + 0.01 * torch.randn(v.shape, generator=generator).to(v)
              for k, v in eager.state_dict().items() if v.is_floating_point()}
    eager.load_state_dict(update, strict=False)
    graphed.load_state_dict(update, strict=False)  # in place, as RLinf's weight syncers do
    after = _call(graphed, 0)
    _close(after, _call(eager, 0), torch.float32)
    assert not torch.allclose(after[0], before[0])


@pytest.mark.gpu
@needs_cuda
def test_release_and_recapture_after_offload(tiny_pi0_dir: Path) -> None:
    eager = _adapter("pi0", tiny_pi0_dir, torch.float32)
    graphed = _adapter("pi0", tiny_pi0_dir, torch.float32)
    graphed.load_state_dict(eager.state_dict())
    graphed.capture_cuda_graph(BATCH, BATCH)
    held = graphed._fast.graphs.held_bytes
    assert held > 0
    # RLinf's offload_model / reload_model
    graphed.release_cuda_graph()
    assert not graphed.is_cuda_graph_enabled()
    graphed.to("cpu")
    torch.cuda.empty_cache()
    graphed.to("cuda")
    graphed.capture_cuda_graph(BATCH, BATCH)
    _close(_call(graphed, 0), _call(eager, 0), torch.float32)
    # weights moved without a release: the graphs are captured again before replaying
    graphed.to("cpu")
    graphed.to("cuda")
    _close(_call(graphed, 1), _call(eager, 1), torch.float32)


@pytest.mark.gpu
@needs_cuda
def test_graphs_and_compile_together_and_uncaptured_sizes(tiny_pi0_dir: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import torch._inductor.config as inductor

    monkeypatch.setattr(inductor, "compile_threads", 1)  # no worker processes
    eager = _adapter("pi0", tiny_pi0_dir, torch.float32)
    fast = _adapter("pi0", tiny_pi0_dir, torch.float32)
    fast.load_state_dict(eager.state_dict())
    fast.enable_torch_compile("max-autotune-no-cudagraphs")
    fast.capture_cuda_graph(BATCH, BATCH)
    _close(_call(fast, 0), _call(eager, 0), torch.float32)
    torch.manual_seed(0)
    odd = fast.predict_action_batch(random_env_obs(2, 0), mode="train")[0]  # captured now
    torch.manual_seed(0)
    want = eager.predict_action_batch(random_env_obs(2, 0), mode="train")[0]
    torch.testing.assert_close(odd, want, rtol=0, atol=1e-4)
    with pytest.raises(DexrlError) as err:
        fast.enable_torch_compile("reduce-overhead")
    assert err.value.code == "policy-compile-mode-graphs"
