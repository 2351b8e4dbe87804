"""dexrl's RLinf π0 adapter on the tiny checkpoint: rollout/training calls, PPO invariants, FSDP.

(Named ``test_pi0_adapter`` because ``tests/models/test_pi0_policy.py`` already takes the module
name ``test_pi0_policy`` in pytest's default import mode.)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from dexrl.bridge.policies.chain import RLSettings, gaussian_entropy, unpack_chains
from dexrl.bridge.policies.pi0 import Pi0RLPolicy, build
from dexrl.checkpoints.policy import load_policy
from dexrl.errors import DexrlError
from dexrl.models.flow.sampling import time_grid
from dexrl.models.transforms import actions_to_env

CHUNK = 8  # chunk_size of the tiny checkpoint
CONF_MODEL = Path(__file__).resolve().parents[2] / "conf" / "model" / "dexbotic_pi0.yaml"
TRAINABLE_PREFIXES = ("model.action_expert.", "model.state_proj.", "model.action_in_proj.",
                      "model.action_time_mlp_in.", "model.action_time_mlp_out.",
                      "model.action_out_proj.", "value_head.")


def _env_obs(batch: int = 3, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    tasks = ["pick up the black bowl and place it on the plate", "open the top drawer",
             "put the_butter in the basket\n", "turn on the stove"]
    return {
        "main_images": rng.integers(0, 256, (batch, 48, 48, 3), dtype=np.uint8),
        "wrist_images": torch.from_numpy(rng.integers(0, 256, (batch, 48, 48, 3), dtype=np.uint8)),
        "states": torch.from_numpy(rng.normal(size=(batch, 8))),  # float64, as LIBERO sends
        "task_descriptions": [tasks[i % len(tasks)] for i in range(batch)],
    }


@pytest.fixture
def make_policy(tiny_pi0_dir: Path) -> Callable[..., Pi0RLPolicy]:
    """Build a fresh adapter (own weights) with a random value head; kwargs go to RLSettings."""

    def make(dtype: torch.dtype | None = None, **settings) -> Pi0RLPolicy:
        settings = {"num_steps": 4, "num_action_chunks": 5, **settings}
        policy = Pi0RLPolicy(load_policy(tiny_pi0_dir, dtype=dtype), RLSettings(**settings))
        if policy.has_value_head:
            generator = torch.Generator().manual_seed(7)
            weight = policy.value_head.weight
            weight.data = torch.randn(weight.shape, generator=generator).to(weight.dtype)
        return policy

    return make


def _rollout(policy: Pi0RLPolicy, seed: int, batch: int = 3, obs_seed: int | None = None,
             **kwargs):
    """One rollout call with the global RNG seeded by ``seed`` (observations by ``obs_seed``)."""
    torch.manual_seed(seed)
    return policy.predict_action_batch(_env_obs(batch, seed if obs_seed is None else obs_seed),
                                       **kwargs)


@pytest.mark.parametrize("method", ["flow_sde", "flow_cps"])
@pytest.mark.parametrize("joint", [False, True])
def test_training_forward_reproduces_rollout_exactly(make_policy, method: str, joint: bool) -> None:
    policy = make_policy(noise_method=method, joint_logprob=joint, ignore_last=method == "flow_cps")
    policy.train()
    steps = set()
    for seed in range(4):
        _, result = _rollout(policy, seed)
        out = policy(forward_inputs=result["forward_inputs"], compute_logprobs=True,
                     compute_entropy=True, compute_values=True, use_cache=False)
        steps.add(int(result["forward_inputs"]["denoise_inds"][0, 0]))
        assert torch.equal(out["logprobs"], result["prev_logprobs"])
        assert torch.equal(out["values"], result["prev_values"][:, 0])
        assert result["prev_logprobs"].abs().min() > 0 and result["prev_values"].abs().min() > 0
        assert out["entropy"].shape == (3, 1) and torch.isfinite(out["entropy"]).all()
    if not joint:  # the value pass is shared with the scored step only when that step is 0
        assert len(steps) > 1 and steps != {0}


def test_rows_of_different_calls_can_be_trained_together(make_policy) -> None:
    policy = make_policy()
    first, second = _rollout(policy, 0)[1], _rollout(policy, 3)[1]
    inputs = {k: torch.cat([first["forward_inputs"][k], second["forward_inputs"][k]])
              for k in first["forward_inputs"]}
    assert inputs["denoise_inds"][:, 0].unique().numel() == 2  # rows scored at different steps
    out = policy(forward_inputs=inputs)
    expected = torch.cat([first["prev_logprobs"], second["prev_logprobs"]])
    torch.testing.assert_close(out["logprobs"], expected, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(
        out["values"], torch.cat([first["prev_values"], second["prev_values"]])[:, 0])


def test_output_shapes_and_forward_inputs(make_policy) -> None:
    policy = make_policy(joint_logprob=True)
    actions, result = _rollout(policy, 0, batch=2)
    assert actions.shape == (2, 5, 7) and actions.dtype == torch.float32
    assert result["prev_logprobs"].shape == (2, 5, 7)
    assert result["prev_logprobs"].dtype == torch.float32
    assert result["prev_values"].shape == (2, 1) and result["prev_values"].dtype == torch.float32
    expected = {
        "images": ((2, 2, 32, 32, 3), torch.uint8),
        "tokens": ((2, 16), torch.int64),
        "token_mask": ((2, 16), torch.bool),
        "state": ((2, 32), torch.float32),
        "sample_ids": ((2,), torch.int64),
        "chains_bits": ((2, 5, CHUNK, 32), torch.int32),
        "denoise_inds": ((2, 4), torch.int64),
    }
    inputs = result["forward_inputs"]
    assert {k: (tuple(v.shape), v.dtype) for k, v in inputs.items()} == expected
    assert inputs["denoise_inds"].tolist() == [[0, 1, 2, 3]] * 2
    # The executed actions are the chain's last step, denormalized and made absolute.
    final = unpack_chains(inputs["chains_bits"])[:, -1]
    states = _env_obs(2, 0)["states"]
    assert torch.equal(actions, actions_to_env(final, states, policy.pi0.norm_stats, "mean_std", 5))
    _, other = _rollout(policy, 1, batch=3)
    for key, value in inputs.items():
        assert torch.cat([value, other["forward_inputs"][key]]).shape[0] == 5


def test_eval_is_deterministic_and_equals_the_inference_policy(make_policy, tiny_pi0_dir) -> None:
    policy = make_policy()
    first_actions, first = _rollout(policy, 0, do_sample=False)
    again_actions, again = _rollout(policy, 1, obs_seed=0, do_sample=False)  # other RNG state
    assert torch.equal(first_actions, again_actions)
    assert torch.equal(first["forward_inputs"]["chains_bits"],
                       again["forward_inputs"]["chains_bits"])
    assert torch.equal(first["prev_logprobs"], torch.zeros(3, 5, 7))
    assert (first["forward_inputs"]["denoise_inds"] == -1).all()
    assert torch.equal(_rollout(policy, 2, obs_seed=0, mode="eval")[0], first_actions)
    sampled = _rollout(policy, 0, do_sample=True)[0]
    assert not torch.allclose(sampled, first_actions)
    with pytest.raises(DexrlError) as err:
        policy(forward_inputs=first["forward_inputs"])
    assert err.value.code == "policy-forward-inputs-not-stochastic"

    noise = torch.randn(3, CHUNK, 32, generator=torch.Generator().manual_seed(5))
    actions, _ = policy.predict_action_batch(_env_obs(3), do_sample=False, noise=noise)
    reference = load_policy(tiny_pi0_dir).predict(_env_obs(3), noise=noise, num_steps=4,
                                                  num_action_chunks=5)
    torch.testing.assert_close(actions, reference["actions"], rtol=1e-5, atol=1e-5)


def test_ode_steps_are_euler_and_small_noise_reduces_to_them(make_policy) -> None:
    policy = make_policy()
    noise = torch.randn(3, CHUNK, 32, generator=torch.Generator().manual_seed(2))
    _, result = policy.predict_action_batch(_env_obs(3), mode="eval", noise=noise)
    chains = unpack_chains(result["forward_inputs"]["chains_bits"])
    network = policy.pi0.network
    obs = policy._observation(result["forward_inputs"])
    cache = network.encode_prefix(obs)
    grid = time_grid(4)
    with torch.no_grad():
        for k in range(4):
            velocity = network.denoise_step(cache, obs.state, chains[:, k], grid[k].expand(3))[0]
            euler = chains[:, k] + velocity * (grid[k + 1] - grid[k])
            torch.testing.assert_close(chains[:, k + 1], euler, rtol=0, atol=1e-6)

    for method in ("flow_sde", "flow_cps"):
        exact = make_policy(noise_method=method, noise_level=0.0)
        _, zero = _rollout(exact, 3, obs_seed=0, mode="train", noise=noise)
        assert torch.equal(unpack_chains(zero["forward_inputs"]["chains_bits"]), chains)
        small = make_policy(noise_method=method, noise_level=1e-5)
        _, near = _rollout(small, 3, obs_seed=0, mode="train", noise=noise)
        near_chains = unpack_chains(near["forward_inputs"]["chains_bits"])
        torch.testing.assert_close(near_chains, chains, rtol=0, atol=1e-4)
        assert not torch.equal(near_chains, chains)


def test_entropy_is_the_gaussian_entropy() -> None:
    std = torch.tensor([0.0, 0.1, 1.0, 3.0])
    expected = torch.distributions.Normal(0.0, std[1:]).entropy()
    assert gaussian_entropy(std)[0] == 0
    torch.testing.assert_close(gaussian_entropy(std)[1:], expected)


def test_train_expert_only_freezes_the_prefix(make_policy) -> None:
    policy = make_policy(train_expert_only=True, detach_critic_input=False)
    names = {n for n, _ in policy.named_parameters()}
    trainable = {n for n, p in policy.named_parameters() if p.requires_grad}
    assert trainable == {n for n in names if n.startswith(TRAINABLE_PREFIXES)}
    assert all(n.startswith(("model.", "value_head.")) for n in names)  # checkpoint key names
    policy.train()
    out = policy(forward_inputs=_rollout(policy, 3)[1]["forward_inputs"])
    (out["logprobs"].sum() + out["values"].sum()).backward()
    assert {n for n, p in policy.named_parameters() if p.grad is not None} == trainable

    full = make_policy(train_expert_only=False)
    full.train()
    out = full(forward_inputs=_rollout(full, 3)[1]["forward_inputs"])
    out["logprobs"].sum().backward()
    grads = {n for n, p in full.named_parameters() if p.grad is not None}
    assert any(n.startswith("model.mm_vision_tower.") for n in grads)
    assert any(n.startswith("model.llm.layers.") for n in grads)


@pytest.mark.parametrize("detach", [True, False])
def test_detach_critic_input_decides_where_value_gradients_go(tiny_pi0_dir, detach: bool) -> None:
    """A freshly built policy (its own value-head init): true keeps the value loss in the head;
    false sends it into the action expert from the first update (a zero-initialised head sent
    nothing there), never into the frozen prefix."""
    policy = Pi0RLPolicy(load_policy(tiny_pi0_dir),
                         RLSettings(num_steps=4, num_action_chunks=5, detach_critic_input=detach))
    for seed in (0, 3):  # the scored step is 0 for one call and not for the other
        policy.zero_grad(set_to_none=True)
        out = policy(forward_inputs=_rollout(policy, seed)[1]["forward_inputs"],
                     compute_logprobs=False)
        (out["values"] - 1.0).square().mean().backward()
        reached = {n for n, p in policy.named_parameters()
                   if p.grad is not None and p.grad.abs().sum() > 0}
        head = {"value_head.weight", "value_head.bias"}
        if detach:
            assert reached == head
        else:
            assert head < reached and any(n.startswith("model.action_expert.") for n in reached)
            assert all(n.startswith(TRAINABLE_PREFIXES) for n in reached)


def test_value_head_init_is_small_nonzero_and_the_same_in_every_build(tiny_pi0_dir) -> None:
    heads = [Pi0RLPolicy(load_policy(tiny_pi0_dir), RLSettings(num_action_chunks=5)).value_head
             for _ in range(2)]
    torch.manual_seed(123)  # the global RNG does not matter
    third = Pi0RLPolicy(load_policy(tiny_pi0_dir), RLSettings(num_action_chunks=5)).value_head
    for head in (heads[1], third):
        assert torch.equal(head.weight, heads[0].weight) and torch.equal(head.bias, heads[0].bias)
    weight = heads[0].weight
    assert (weight != 0).all() and 0.005 < weight.std() < 0.05 and (heads[0].bias == 0).all()


def test_without_value_head(make_policy) -> None:
    policy = make_policy(add_value_head=False)
    assert not hasattr(policy, "value_head")  # RLinf's bootstrap check
    _, result = _rollout(policy, 0)
    assert torch.equal(result["prev_values"], torch.zeros(3, 1))
    assert policy(forward_inputs=result["forward_inputs"], compute_values=False)["values"] is None
    with pytest.raises(DexrlError) as err:
        policy(forward_inputs=result["forward_inputs"], compute_values=True)
    assert err.value.code == "policy-no-value-head"


@pytest.mark.parametrize(("precision", "dtype"),
                         [("fp32", torch.float32), ("bf16", torch.bfloat16), (None, torch.float32)])
def test_rlinf_get_model_builds_the_registered_policy(tiny_pi0_dir, precision, dtype) -> None:
    import rlinf.models

    from dexrl.bridge import registry

    assert "dexbotic_pi0" in registry.register()
    cfg = OmegaConf.load(CONF_MODEL)
    cfg.model_path = str(tiny_pi0_dir)
    cfg.precision = precision
    cfg.num_action_chunks = 5
    model = rlinf.models.get_model(cfg)
    assert isinstance(model, Pi0RLPolicy) and model.pi0.network is not None
    assert {p.dtype for p in model.parameters()} == {dtype}
    assert model.settings.noise_level == cfg.dexbotic.noise_level
    assert model.settings.num_steps == cfg.num_steps
    assert model.pi0.network.attention == cfg.dexbotic.attention == "eager"
    assert model.prefix_store.settings.device_gb == cfg.dexbotic.prefix_cache.device_gb
    actions, result = model.predict_action_batch(_env_obs(2))
    assert actions.shape == (2, 5, cfg.action_dim)
    assert result["prev_logprobs"].dtype == torch.float32


def test_sdpa_attention_setting_reaches_the_network(tiny_pi0_dir) -> None:
    cfg = {"model_path": str(tiny_pi0_dir), "num_action_chunks": 5,
           "dexbotic": {"attention": "sdpa"}}
    assert build(cfg, None).pi0.network.attention == "sdpa"


def test_bad_settings_fail_clearly(tiny_pi0_dir) -> None:
    base = {"model_path": str(tiny_pi0_dir), "num_action_chunks": 5, "action_dim": 7}
    cases = [
        ({"dexbotic": {"noise_method": "flow_noise"}}, "noise_method"),
        ({"dexbotic": {"noise_method": "flow_cps", "noise_level": 2.0}}, "noise_level"),
        ({"safe_get_logprob": True}, "safe_get_logprob"),
        ({"num_action_chunks": CHUNK + 1}, "num_action_chunks"),
        ({"num_steps": 1, "ignore_last": True}, "num_steps"),
        ({"model_path": None}, "model_path"),
        ({"dexbotic": {"attention": "flash"}}, "attention"),
        ({"dexbotic": {"prefix_cache": {"host_gb": -2}}}, "prefix_cache.host_gb"),
    ]
    for override, key in cases:
        with pytest.raises(DexrlError) as info:
            build({**base, **override}, None)
        assert key in info.value.where


@contextlib.contextmanager
def _single_process_group(tmp_path: Path) -> Iterator[None]:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0,
                            world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_fsdp2_bf16_training_reproduces_the_rollout(make_policy, tmp_path: Path) -> None:
    """RLinf's own FSDP2 wrapping with bf16 mixed precision: the units gather their weights and
    the chains survive the cast of the forward inputs, so the first ratio is still exactly 1."""
    from rlinf.hybrid_engines.fsdp.utils import apply_fsdp2_to_model
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, OffloadPolicy

    _, result = _rollout(make_policy(torch.bfloat16), 3)
    with _single_process_group(tmp_path):
        precision = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16,
                                         cast_forward_inputs=True)
        model = apply_fsdp2_to_model(make_policy(torch.bfloat16), {},
                                     init_device_mesh("cpu", (1,)), precision, OffloadPolicy(),
                                     reshard_after_forward=True)
        model.train()
        out = model(forward_inputs=result["forward_inputs"], compute_values=True)
        assert torch.equal(out["logprobs"], result["prev_logprobs"])
        assert torch.equal(out["values"], result["prev_values"][:, 0])
        (out["logprobs"].sum() + out["values"].sum()).backward()
        grads = {n for n, p in model.named_parameters() if p.grad is not None}
        assert grads and all(n.startswith(TRAINABLE_PREFIXES) for n in grads)


def test_fsdp2_epochs_reuse_the_prefix_and_still_reproduce_the_rollout(make_policy,
                                                                       tmp_path: Path) -> None:
    """Through RLinf's FSDP2 wrapping (fp32): the step hook reaches the policy, the second epoch
    takes the prefix from the cache (the frozen LLM's units are not gathered for it), and both
    epochs give the rollout's log-probs and values exactly, and the same gradients."""
    from rlinf.hybrid_engines.fsdp.utils import apply_fsdp2_to_model
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, OffloadPolicy

    _, result = _rollout(make_policy(), 3)
    with _single_process_group(tmp_path):
        precision = MixedPrecisionPolicy(param_dtype=torch.float32, cast_forward_inputs=True)
        model = apply_fsdp2_to_model(make_policy(), {}, init_device_mesh("cpu", (1,)), precision,
                                     OffloadPolicy(), reshard_after_forward=True)
        model.train()
        model.set_global_step(0)
        grads = []
        for _ in range(2):
            out = model(forward_inputs=result["forward_inputs"], compute_values=True)
            assert torch.equal(out["logprobs"], result["prev_logprobs"])
            assert torch.equal(out["values"], result["prev_values"][:, 0])
            (out["logprobs"].sum() + out["values"].sum()).backward()
            grads.append({n: p.grad.full_tensor().clone() for n, p in model.named_parameters()
                          if p.grad is not None})
            model.zero_grad()
        assert (model.prefix_store.computed_rows, model.prefix_store.reused_rows) == (3, 3)
        assert grads[0].keys() == grads[1].keys()
        assert all(torch.equal(g, grads[1][n]) for n, g in grads[0].items())
