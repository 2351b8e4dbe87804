"""The compiled rollout (``rollout.enable_torch_compile``) on the CPU: the tensor-only rollout
core against the eager chain, torch.compile with zero graph breaks and no recompilation across
calls, modes and in-place weight updates, and the hooks' refusals. The CUDA-graph half is in
``test_rollout_graphs.py`` (``gpu`` marker)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers.env_obs import random_env_obs
from torch._dynamo.utils import counters

from dexrl.bridge.policies.chain import RLSettings
from dexrl.bridge.policies.dm0 import Dm0RLPolicy
from dexrl.bridge.policies.fast_rollout import COMPILE_MODES
from dexrl.bridge.policies.flow import FlowRLPolicy
from dexrl.bridge.policies.pi0 import Pi0RLPolicy
from dexrl.bridge.policies.rollout_core import StepTables
from dexrl.checkpoints.policy import load_policy
from dexrl.errors import DexrlError
from dexrl.models.flow.sampling import sde_sigma, step_moments, time_grid

BATCH = 3




def _adapters(request: pytest.FixtureRequest, model: str,
              **settings) -> tuple[FlowRLPolicy, FlowRLPolicy]:
    ckpt = request.getfixturevalue("tiny_pi0_dir" if model == "pi0" else "tiny_dm0_dir")
    cls = Pi0RLPolicy if model == "pi0" else Dm0RLPolicy
    rl = RLSettings(num_steps=4, num_action_chunks=5, **settings)
    eager, fast = (cls(load_policy(ckpt), rl).eval() for _ in range(2))
    fast.load_state_dict(eager.state_dict())
    return eager, fast


def _call(adapter: FlowRLPolicy, seed: int, mode: str) -> dict[str, torch.Tensor]:
    torch.manual_seed(seed)
    actions, result = adapter.predict_action_batch(random_env_obs(BATCH, seed), mode=mode)
    inputs = result["forward_inputs"]
    return {"actions": actions, "logprobs": result["prev_logprobs"],
            "values": result["prev_values"], "chains": inputs["chains_bits"].view(torch.float32),
            "denoise_inds": inputs["denoise_inds"]}


def _assert_parity(fast: dict, eager: dict, atol: float) -> None:
    assert torch.equal(fast["denoise_inds"], eager["denoise_inds"])
    for key in ("actions", "logprobs", "values", "chains"):
        torch.testing.assert_close(fast[key], eager[key], rtol=0, atol=atol, msg=key)


@pytest.mark.parametrize("model", ["pi0", "dm0"])
@pytest.mark.parametrize("method", ["flow_sde", "flow_cps", "flow_noise"])
@pytest.mark.parametrize("joint", [False, True], ids=["one-step", "joint"])
def test_tensor_core_equals_the_eager_chain(request: pytest.FixtureRequest, model: str,
                                            method: str, joint: bool) -> None:
    """Uncompiled, the core does the eager chain's arithmetic: the same noise from the same
    seed, bit-identical chains and actions; log-probs to float32 noise (a joint log-prob sums
    its terms in another order)."""
    eager, fast = _adapters(request, model, noise_method=method, joint_logprob=joint,
                            ignore_last=method == "flow_cps")
    fast._fast_rollout()
    for seed, mode in ((0, "train"), (1, "train"), (2, "eval")):
        got, want = _call(fast, seed, mode), _call(eager, seed, mode)
        assert torch.equal(got["chains"], want["chains"])
        assert torch.equal(got["actions"], want["actions"])
        _assert_parity(got, want, atol=1e-6)


def test_step_tables_hold_the_eager_moments() -> None:
    settings = RLSettings(num_steps=5, noise_method="flow_sde", noise_level=0.7)
    tables = StepTables.build(settings)
    grid = time_grid(5)
    x, v = torch.randn(2, 3, 4), torch.randn(2, 3, 4)
    for k in range(5):
        t, delta = grid[k], grid[k] - grid[k + 1]
        mean, std = step_moments(x, v, t, delta, "flow_sde", 0.7, sde_sigma(grid, k, 0.7))
        row = tables.rows([k])[k]
        fast_mean = (x - v * row[0]) * row[1] + (x + v * (1.0 - row[0])) * row[2]
        torch.testing.assert_close(fast_mean, mean, rtol=0, atol=1e-6)
        torch.testing.assert_close(row[3], std[0, 0, 0], rtol=0, atol=0)
        assert tables.rows([])[k][3] == 0  # the ODE step has no noise
    tail = tables.rows([1, 3])[5]
    assert tail.tolist() == [2.0, 0.0, 0.0, 0.0]  # two terms, no initial term (not joint)


def _compile_counts() -> tuple[int, int, int]:
    return (counters["stats"]["unique_graphs"], sum(counters["graph_break"].values()),
            sum(counters["recompiles"].values()))


@pytest.mark.parametrize("model", ["pi0", "dm0"])
def test_compiled_rollout_has_no_graph_break_and_never_recompiles(
        request: pytest.FixtureRequest, model: str) -> None:
    """torch.compile's tracing (aot_eager: dynamo and AOTAutograd, no code generation): three
    graphs for a batch size, no break; train and eval calls, new scored steps and in-place
    weight updates (as RLinf's weight syncers make them) reuse them."""
    torch._dynamo.reset()
    counters.clear()
    eager, fast = _adapters(request, model, noise_method="flow_sde", joint_logprob=False)
    fast._fast_rollout().enable_compile("default", backend="aot_eager")
    _assert_parity(_call(fast, 0, "train"), _call(eager, 0, "train"), atol=1e-6)
    graphs, breaks, recompiles = _compile_counts()
    assert (graphs, breaks) == (3, 0)
    generator = torch.Generator().manual_seed(1)
    for seed in range(1, 6):
        update = {k: v + 0.01 * torch.randn(v.shape, generator=generator)
                  for k, v in eager.state_dict().items() if v.is_floating_point()}
        eager.load_state_dict(update, strict=False)
        fast.load_state_dict(update, strict=False)
        mode = "eval" if seed % 2 else "train"
        _assert_parity(_call(fast, seed, mode), _call(eager, seed, mode), atol=1e-6)
    assert _compile_counts() == (graphs, 0, recompiles)
    torch._dynamo.reset()


@pytest.mark.slow  # inductor's code generation; the aot_eager tracing above is in make test
@pytest.mark.parametrize("model", ["pi0", "dm0"])
def test_inductor_compiled_rollout_equals_eager(request: pytest.FixtureRequest, model: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The generated code (inductor, what ``rollout.enable_torch_compile`` runs) against eager
    in fp32, both noise methods and modes with the same seed (one compilation serves both: the
    methods differ only in the step table's values)."""
    import torch._inductor.config as inductor

    monkeypatch.setattr(inductor, "compile_threads", 1)  # no compile worker processes
    torch._dynamo.reset()
    for method in ("flow_sde", "flow_cps"):
        eager, fast = _adapters(request, model, noise_method=method, joint_logprob=True)
        fast.enable_torch_compile("default")
        for seed, mode in ((0, "train"), (1, "eval")):
            _assert_parity(_call(fast, seed, mode), _call(eager, seed, mode), atol=1e-4)
    torch._dynamo.reset()


@pytest.mark.parametrize("model", ["pi0"])
def test_flow_noise_compiles_its_head_into_the_step_without_a_break(
        request: pytest.FixtureRequest, model: str) -> None:
    """flow_noise's learned std is computed inside the denoising-step graph (aot_eager tracing):
    three graphs, no break, the eager chain's numbers."""
    torch._dynamo.reset()
    counters.clear()
    eager, fast = _adapters(request, model, noise_method="flow_noise", joint_logprob=True)
    fast._fast_rollout().enable_compile("default", backend="aot_eager")
    for seed, mode in ((0, "train"), (1, "eval"), (2, "train")):
        _assert_parity(_call(fast, seed, mode), _call(eager, seed, mode), atol=1e-6)
    assert _compile_counts()[:2] == (3, 0)
    torch._dynamo.reset()


def test_hooks_refuse_what_cannot_work(tiny_pi0_dir: Path) -> None:
    adapter = Pi0RLPolicy(load_policy(tiny_pi0_dir),
                          RLSettings(num_steps=2, num_action_chunks=5))
    with pytest.raises(DexrlError) as err:
        adapter.enable_torch_compile("fastest")
    assert err.value.code == "policy-compile-mode-unknown"
    with pytest.raises(DexrlError) as err:
        adapter.capture_cuda_graph(4, 4)
    assert err.value.code == "policy-cuda-graph-no-gpu"
    assert not adapter.is_cuda_graph_enabled()
    adapter.release_cuda_graph()  # nothing captured: nothing to do


def test_compile_modes_are_torchs() -> None:
    from torch._inductor import list_mode_options

    # the four modes RLinf's hook documents; newer torch releases add more (2.13: "lite")
    assert set(COMPILE_MODES) <= {"default", *list_mode_options()}
