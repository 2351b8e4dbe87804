"""dexrl's RLinf flow adapter (:mod:`dexrl.bridge.policies.flow`) on the tiny π0 and DM0: rollout
and training calls, PPO invariants, freezing, the value head, RLinf's ``get_model`` and FSDP2.

The tests that take ``model`` run on both; those pinned to π0 check the adapter's maths in depth
(they hold for DM0's network as well: the same code). What one model alone adds is in
``test_pi0.py`` and ``test_dm0.py``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from helpers.adapters import ADAPTERS, NUM_STEPS
from torch.distributions import Normal

from dexrl.bridge.policies import dm0, pi0
from dexrl.bridge.policies.chain import RLSettings, unpack_chains
from dexrl.bridge.policies.flow import NOISE_HEAD_HIDDEN, FlowRLPolicy
from dexrl.checkpoints.policy import load_policy
from dexrl.errors import DexrlError
from dexrl.models.dm0.policy import Dm0Policy
from dexrl.models.dm0.tiny import TINY_PROMPT_LENGTH, TINY_VISION
from dexrl.models.flow.sampling import time_grid
from dexrl.models.transforms import actions_to_env

CHUNK = 8  # chunk_size of the tiny checkpoints
BUILDERS = {"pi0": pi0.build, "dm0": dm0.build}
IMAGE = {"pi0": 32, "dm0": TINY_VISION.image_size}  # the towers' image sizes
PROMPT = {"pi0": 16, "dm0": TINY_PROMPT_LENGTH}  # the checkpoints' prompt lengths
TRAINABLE_PREFIXES = {
    "pi0": ("model.action_expert.", "model.state_proj.", "model.action_in_proj.",
            "model.action_time_mlp_in.", "model.action_time_mlp_out.", "model.action_out_proj.",
            "value_head."),
    "dm0": ("model.action_expert.", "model.action_in_proj.", "model.action_time_mlp_in.",
            "model.action_time_mlp_out.", "model.action_out_proj.", "value_head."),
}
# What train_expert_only freezes (and full training reaches).
FROZEN_PREFIXES = {
    "pi0": ("model.mm_vision_tower.", "model.llm.layers."),
    "dm0": ("model.mm_vision_tower.vision_tower.transformer.",
            "model.mm_vision_tower.vision_tower.vit_downsampler1.",
            "model.mm_vision_tower.vision_tower.vit_downsampler2.",
            "model.mm_projector.", "model.llm.layers."),
}
PI0_ONLY = pytest.mark.parametrize("model", ["pi0"], indirect=True)


@pytest.mark.parametrize("method", ["flow_sde", "flow_cps", "flow_noise"])
@pytest.mark.parametrize("joint", [False, True])
def test_training_forward_reproduces_rollout_exactly(make_policy, rollout, method: str,
                                                     joint: bool) -> None:
    policy = make_policy(noise_method=method, joint_logprob=joint, ignore_last=method == "flow_cps")
    policy.train()
    steps = set()
    for seed in range(4):
        _, result = rollout(policy, seed)
        out = policy(forward_inputs=result["forward_inputs"], compute_logprobs=True,
                     compute_entropy=True, compute_values=True, use_cache=False)
        steps.add(int(result["forward_inputs"]["denoise_inds"][0, 0]))
        assert torch.equal(out["logprobs"], result["prev_logprobs"])
        assert torch.equal(out["values"], result["prev_values"][:, 0])
        assert result["prev_logprobs"].abs().min() > 0 and result["prev_values"].abs().min() > 0
        assert out["entropy"].shape == (3, 1) and torch.isfinite(out["entropy"]).all()
    if not joint:  # the value pass is shared with the scored step only when that step is 0
        assert len(steps) > 1 and steps != {0}


@PI0_ONLY
def test_rows_of_different_calls_can_be_trained_together(make_policy, rollout) -> None:
    policy = make_policy()
    first, second = rollout(policy, 0)[1], rollout(policy, 3)[1]
    inputs = {k: torch.cat([first["forward_inputs"][k], second["forward_inputs"][k]])
              for k in first["forward_inputs"]}
    assert inputs["denoise_inds"][:, 0].unique().numel() == 2  # rows scored at different steps
    out = policy(forward_inputs=inputs)
    expected = torch.cat([first["prev_logprobs"], second["prev_logprobs"]])
    torch.testing.assert_close(out["logprobs"], expected, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(
        out["values"], torch.cat([first["prev_values"], second["prev_values"]])[:, 0])


@pytest.mark.parametrize("joint", [True, False], ids=["joint", "one-step"])
def test_output_shapes_and_forward_inputs(model: str, make_policy, rollout, make_env_obs,
                                          joint: bool) -> None:
    policy = make_policy(joint_logprob=joint)
    steps = NUM_STEPS[model]
    actions, result = rollout(policy, 0, batch=2)
    assert actions.shape == (2, 5, 7) and actions.dtype == torch.float32
    assert result["prev_logprobs"].shape == (2, 5, 7)
    assert result["prev_logprobs"].dtype == torch.float32
    assert result["prev_values"].shape == (2, 1) and result["prev_values"].dtype == torch.float32
    size = IMAGE[model]
    expected = {
        "images": ((2, 2, size, size, 3), torch.uint8),
        "tokens": ((2, PROMPT[model]), torch.int64),
        "token_mask": ((2, PROMPT[model]), torch.bool),
        "state": ((2, 32), torch.float32),
        "sample_ids": ((2,), torch.int64),
        "chains_bits": ((2, steps + 1, CHUNK, 32), torch.int32),
        "denoise_inds": ((2, steps if joint else 1), torch.int64),
    }
    inputs = result["forward_inputs"]
    assert {k: (tuple(v.shape), v.dtype) for k, v in inputs.items()} == expected
    if joint:
        assert inputs["denoise_inds"].tolist() == [list(range(steps))] * 2
    # The executed actions are the chain's last step, denormalized and made absolute.
    final = unpack_chains(inputs["chains_bits"])[:, -1]
    states = make_env_obs(2, 0)["states"]
    assert torch.equal(actions,
                       actions_to_env(final, states, policy.flow.norm_stats, "mean_std", 5))
    _, other = rollout(policy, 1, batch=3)
    for key, value in inputs.items():
        assert torch.cat([value, other["forward_inputs"][key]]).shape[0] == 5


@pytest.mark.parametrize(("model", "norm_mode"),
                         [("pi0", "mean_std"), ("dm0", "mean_std"), ("dm0", "quantile")],
                         indirect=["model"])
def test_eval_is_deterministic_and_equals_the_inference_policy(model: str, model_dir: Path,
                                                               model_cfg, rollout, make_env_obs,
                                                               norm_mode: str) -> None:
    """Built from the shipped config (DM0's prompt length 200, not the checkpoint's 64): the
    padding is masked, so eval actions equal ``load_policy(...).predict`` with the checkpoint's
    length."""
    policy = BUILDERS[model](model_cfg(f"dexbotic.norm_mode={norm_mode}"))
    assert policy.flow.norm_mode == norm_mode
    prompt = 200 if model == "dm0" else PROMPT[model]
    assert policy.flow.tokenizer.model_max_length == prompt
    first_actions, first = rollout(policy, 0, do_sample=False)
    again_actions, again = rollout(policy, 1, obs_seed=0, do_sample=False)  # other RNG state
    assert torch.equal(first_actions, again_actions)
    assert torch.equal(first["forward_inputs"]["chains_bits"],
                       again["forward_inputs"]["chains_bits"])
    assert torch.equal(first["prev_logprobs"], torch.zeros(3, 5, 7))
    assert (first["forward_inputs"]["denoise_inds"] == -1).all()
    assert first["forward_inputs"]["tokens"].shape == (3, prompt)
    assert torch.equal(rollout(policy, 2, obs_seed=0, mode="eval")[0], first_actions)
    sampled = rollout(policy, 0, do_sample=True)[0]
    assert not torch.allclose(sampled, first_actions)
    with pytest.raises(DexrlError) as err:  # (DM0's shipped config has no value head)
        policy(forward_inputs=first["forward_inputs"], compute_values=policy.has_value_head)
    assert err.value.code == "policy-forward-inputs-not-stochastic"

    noise = torch.randn(3, CHUNK, 32, generator=torch.Generator().manual_seed(5))
    actions, _ = policy.predict_action_batch(make_env_obs(3), do_sample=False, noise=noise)
    reference = load_policy(model_dir, norm_mode=norm_mode).predict(
        make_env_obs(3), noise=noise, num_steps=policy.settings.num_steps, num_action_chunks=5)
    torch.testing.assert_close(actions, reference["actions"], rtol=1e-5, atol=1e-5)


@PI0_ONLY
def test_ode_steps_are_euler_and_small_noise_reduces_to_them(make_policy, rollout,
                                                             make_env_obs) -> None:
    policy = make_policy()
    noise = torch.randn(3, CHUNK, 32, generator=torch.Generator().manual_seed(2))
    _, result = policy.predict_action_batch(make_env_obs(3), mode="eval", noise=noise)
    chains = unpack_chains(result["forward_inputs"]["chains_bits"])
    network = policy.flow.network
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
        _, zero = rollout(exact, 3, obs_seed=0, mode="train", noise=noise)
        assert torch.equal(unpack_chains(zero["forward_inputs"]["chains_bits"]), chains)
        small = make_policy(noise_method=method, noise_level=1e-5)
        _, near = rollout(small, 3, obs_seed=0, mode="train", noise=noise)
        near_chains = unpack_chains(near["forward_inputs"]["chains_bits"])
        torch.testing.assert_close(near_chains, chains, rtol=0, atol=1e-4)
        assert not torch.equal(near_chains, chains)


def test_train_expert_only_freezes_the_prefix(model: str, make_policy, rollout) -> None:
    trainable_prefixes, frozen_prefixes = TRAINABLE_PREFIXES[model], FROZEN_PREFIXES[model]
    policy = make_policy(train_expert_only=True, detach_critic_input=False)
    names = {n for n, _ in policy.named_parameters()}
    trainable = {n for n, p in policy.named_parameters() if p.requires_grad}
    assert trainable == {n for n in names if n.startswith(trainable_prefixes)}
    assert all(any(n.startswith(p) for n in names) for p in frozen_prefixes)
    assert all(n.startswith(("model.", "value_head.")) for n in names)  # checkpoint key names
    policy.train()
    out = policy(forward_inputs=rollout(policy, 3)[1]["forward_inputs"])
    (out["logprobs"].sum() + out["values"].sum()).backward()
    assert {n for n, p in policy.named_parameters() if p.grad is not None} == trainable

    full = make_policy(train_expert_only=False)
    full.train()
    out = full(forward_inputs=rollout(full, 3)[1]["forward_inputs"])
    out["logprobs"].sum().backward()
    grads = {n for n, p in full.named_parameters() if p.grad is not None}
    for prefix in frozen_prefixes:
        assert any(n.startswith(prefix) for n in grads), prefix


@PI0_ONLY
@pytest.mark.parametrize("detach", [True, False])
def test_detach_critic_input_decides_where_value_gradients_go(model: str, model_dir: Path,
                                                              rollout, detach: bool) -> None:
    """A freshly built policy (its own value-head init): true keeps the value loss in the head;
    false sends it into the action expert from the first update (a zero-initialised head sent
    nothing there), never into the frozen prefix."""
    policy = ADAPTERS[model](load_policy(model_dir),
                             RLSettings(num_steps=4, num_action_chunks=5,
                                        detach_critic_input=detach))
    for seed in (0, 3):  # the scored step is 0 for one call and not for the other
        policy.zero_grad(set_to_none=True)
        out = policy(forward_inputs=rollout(policy, seed)[1]["forward_inputs"],
                     compute_logprobs=False)
        (out["values"] - 1.0).square().mean().backward()
        reached = {n for n, p in policy.named_parameters()
                   if p.grad is not None and p.grad.abs().sum() > 0}
        head = {"value_head.weight", "value_head.bias"}
        if detach:
            assert reached == head
        else:
            assert head < reached and any(n.startswith("model.action_expert.") for n in reached)
            assert all(n.startswith(TRAINABLE_PREFIXES[model]) for n in reached)


@PI0_ONLY
def test_value_head_init_is_small_nonzero_and_the_same_in_every_build(model: str,
                                                                       model_dir: Path) -> None:
    adapter = ADAPTERS[model]
    heads = [adapter(load_policy(model_dir), RLSettings(num_action_chunks=5)).value_head
             for _ in range(2)]
    torch.manual_seed(123)  # the global RNG does not matter
    third = adapter(load_policy(model_dir), RLSettings(num_action_chunks=5)).value_head
    for head in (heads[1], third):
        assert torch.equal(head.weight, heads[0].weight) and torch.equal(head.bias, heads[0].bias)
    weight = heads[0].weight
    assert (weight != 0).all() and 0.005 < weight.std() < 0.05 and (heads[0].bias == 0).all()


@PI0_ONLY
def test_without_value_head(make_policy, rollout) -> None:
    policy = make_policy(add_value_head=False)
    assert not hasattr(policy, "value_head")  # RLinf's bootstrap check
    _, result = rollout(policy, 0)
    assert torch.equal(result["prev_values"], torch.zeros(3, 1))
    assert policy(forward_inputs=result["forward_inputs"], compute_values=False)["values"] is None
    with pytest.raises(DexrlError) as err:
        policy(forward_inputs=result["forward_inputs"], compute_values=True)
    assert err.value.code == "policy-no-value-head"


@pytest.mark.parametrize(("model", "precision", "dtypes"), [
    ("pi0", "fp32", {torch.float32}), ("pi0", "bf16", {torch.bfloat16}),
    ("pi0", None, {torch.float32}), ("dm0", "fp32", {torch.float32}),
    ("dm0", "bf16", {torch.bfloat16, torch.float32}),
], indirect=["model"])
def test_rlinf_get_model_builds_dexrls_registered_policy(model: str, model_cfg, make_env_obs,
                                                         precision: str | None,
                                                         dtypes: set) -> None:
    """dexrl's adapter, for DM0 in place of RLinf's built-in ``dexbotic_dm0``, with the shipped
    config's settings."""
    import rlinf.models

    from dexrl.bridge import registry

    model_type = f"dexbotic_{model}"
    assert model_type in registry.register()
    assert registry.registered_model_types([model_type]) == [model_type]
    cfg = model_cfg()
    cfg.precision = precision
    built = rlinf.models.get_model(cfg)
    assert isinstance(built, ADAPTERS[model]) and built.flow.network is not None
    assert {p.dtype for p in built.parameters()} == dtypes
    if len(dtypes) > 1:  # DM0's rule: vision stem, position embedding, RMSNorms stay fp32
        fp32 = {n for n, p in built.named_parameters() if p.dtype == torch.float32}
        assert fp32 and fp32 == {n for n, _ in built.named_parameters()
                                 if Dm0Policy.keeps_float32(n)}
    assert built.settings.noise_level == cfg.dexbotic.noise_level
    assert built.settings.num_steps == cfg.num_steps
    assert built.has_value_head == cfg.add_value_head
    assert built.flow.network.attention == cfg.dexbotic.attention == "eager"
    assert built.prefix_store.settings.device_gb == cfg.dexbotic.prefix_cache.device_gb
    actions, result = built.predict_action_batch(make_env_obs(2))
    assert actions.shape == (2, 5, cfg.action_dim)
    assert result["prev_logprobs"].dtype == torch.float32


@contextlib.contextmanager
def _single_process_group(tmp_path: Path) -> Iterator[None]:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0,
                            world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def _fsdp2(policy: FlowRLPolicy, dtype: torch.dtype) -> FlowRLPolicy:
    """Wrap with RLinf's own FSDP2 code, with mixed precision as RLinf's actor sets it."""
    from rlinf.hybrid_engines.fsdp.utils import apply_fsdp2_to_model
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, OffloadPolicy

    precision = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=dtype,
                                     cast_forward_inputs=True)
    return apply_fsdp2_to_model(policy, {}, init_device_mesh("cpu", (1,)), precision,
                                OffloadPolicy(), reshard_after_forward=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_fsdp2_training_reproduces_the_rollout(model: str, make_policy, rollout,
                                               tmp_path: Path, dtype: torch.dtype) -> None:
    """RLinf's own FSDP2 wrapping: the model's units gather their shards and the chains survive
    the cast of the forward inputs, so the first ratio is exactly 1 — except DM0 in bf16, whose
    fp32 RMSNorms get units of their own (FSDP2 fails otherwise) that FSDP computes in bf16, so
    the re-scored log-probs are only close to the rollout's."""
    from torch.distributed.fsdp import FSDPModule

    _, result = rollout(make_policy(dtype), 3)
    with _single_process_group(tmp_path):
        wrapped = _fsdp2(make_policy(dtype), dtype)
        units = {type(m).__name__ for m in wrapped.modules() if isinstance(m, FSDPModule)}
        # FSDP2 renames the classes it wraps.
        assert {f"FSDP{name}" for name in ADAPTERS[model]._no_split_modules} <= units
        wrapped.train()
        out = wrapped(forward_inputs=result["forward_inputs"], compute_values=True)
        if (model, dtype) != ("dm0", torch.bfloat16):
            assert torch.equal(out["logprobs"], result["prev_logprobs"])
            assert torch.equal(out["values"], result["prev_values"][:, 0])
        else:
            torch.testing.assert_close(out["logprobs"], result["prev_logprobs"], rtol=0,
                                       atol=2e-2)
        (out["logprobs"].sum() + out["values"].sum()).backward()
        grads = {n for n, p in wrapped.named_parameters() if p.grad is not None}
        assert grads and all(n.startswith(TRAINABLE_PREFIXES[model]) for n in grads)


@PI0_ONLY
def test_fsdp2_epochs_reuse_the_prefix_and_still_reproduce_the_rollout(make_policy, rollout,
                                                                       tmp_path: Path) -> None:
    """Through RLinf's FSDP2 wrapping (fp32): the step hook reaches the policy, the second epoch
    takes the prefix from the cache (the frozen LLM's units are not gathered for it), and both
    epochs give the rollout's log-probs and values exactly, and the same gradients."""
    _, result = rollout(make_policy(), 3)
    with _single_process_group(tmp_path):
        wrapped = _fsdp2(make_policy(), torch.float32)
        wrapped.train()
        wrapped.set_global_step(0)
        grads = []
        for _ in range(2):
            out = wrapped(forward_inputs=result["forward_inputs"], compute_values=True)
            assert torch.equal(out["logprobs"], result["prev_logprobs"])
            assert torch.equal(out["values"], result["prev_values"][:, 0])
            (out["logprobs"].sum() + out["values"].sum()).backward()
            grads.append({n: p.grad.full_tensor().clone() for n, p in wrapped.named_parameters()
                          if p.grad is not None})
            wrapped.zero_grad()
        assert (wrapped.prefix_store.computed_rows, wrapped.prefix_store.reused_rows) == (3, 3)
        assert grads[0].keys() == grads[1].keys()
        assert all(torch.equal(g, grads[1][n]) for n, g in grads[0].items())


# --- flow_noise (πRL's Flow-Noise): the noise head as RLinf's openpi builds it, log-probabilities
# and entropy against an independent computation, gradients into the head, the deterministic
# evaluation that never calls it, and its place in the state dict ---

RANGE = (0.2, 0.9)  # wide, so that a wrong squashing or bound shows in the numbers


def _noise_policy(make_policy, **settings):  # noqa: ANN001, ANN202
    return make_policy(noise_method="flow_noise", joint_logprob=True, noise_std_range=RANGE,
                       **settings)


def _independent_std(policy, hidden: torch.Tensor) -> torch.Tensor:  # noqa: ANN001
    """The head's std from its weights alone: MLP (tanh, tanh, linear), tanh-squashed
    log-variance mapped onto [log min², log max²], std = exp(logvar / 2)."""
    linears = [m for m in policy.noise_head.modules() if isinstance(m, torch.nn.Linear)]
    assert [m.out_features for m in linears[:-1]] == NOISE_HEAD_HIDDEN
    x = hidden.float()
    for i, layer in enumerate(linears):
        x = x @ layer.weight.float().T + layer.bias.float()
        if i < len(linears) - 1:
            x = torch.tanh(x)
    low, high = (2 * math.log(b) for b in RANGE)
    logvar = low + (high - low) * (torch.tanh(x) + 1) / 2
    return torch.exp(logvar / 2)


def test_logprobs_and_entropy_match_an_independent_computation(make_policy, rollout) -> None:
    policy = _noise_policy(make_policy).eval()
    actions, result = rollout(policy, 0)
    inputs = result["forward_inputs"]
    chains = unpack_chains(inputs["chains_bits"])
    steps = policy.settings.num_steps
    grid = time_grid(steps)
    obs = policy._observation(inputs)
    cache = policy.flow.network.encode_prefix(obs)
    logps, ents = [Normal(0.0, 1.0).log_prob(chains[:, 0])], [Normal(0.0, 1.0).entropy()
                                                              .expand_as(chains[:, 0])]
    with torch.no_grad():
        for k in range(steps):
            t = grid[k].expand(chains.shape[0])
            velocity, hidden = policy.flow.network.denoise_step(cache, obs.state, chains[:, k], t)
            mean = chains[:, k] - velocity.float() * (grid[k] - grid[k + 1])  # the Euler step
            dist = Normal(mean, _independent_std(policy, hidden))
            logps.append(dist.log_prob(chains[:, k + 1]))
            ents.append(dist.entropy())
    chunk, dim = policy.settings.num_action_chunks, policy.settings.env_action_dim
    want_logp = torch.stack(logps, 1).mean(1)[:, :chunk, :dim]
    want_ent = torch.stack(ents, 1).mean(1)[:, :chunk, :dim].mean(dim=(1, 2))[:, None]
    torch.testing.assert_close(result["prev_logprobs"], want_logp, rtol=1e-5, atol=1e-5)
    out = policy(forward_inputs=inputs, compute_logprobs=True, compute_entropy=True,
                 compute_values=False)
    torch.testing.assert_close(out["logprobs"], want_logp, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out["entropy"], want_ent, rtol=1e-5, atol=1e-5)


def test_the_std_stays_in_its_range_and_starts_at_the_same_head_everywhere(make_policy) -> None:
    first, second = _noise_policy(make_policy), _noise_policy(make_policy)
    torch.manual_seed(123)  # the global RNG does not decide the head's weights
    third = _noise_policy(make_policy)
    for other in (second, third):
        for (name, a), (_, b) in zip(first.noise_head.state_dict().items(),
                                     other.noise_head.state_dict().items(), strict=True):
            assert torch.equal(a, b), name
    width = first.model.action_out_proj.weight.shape[1]
    extreme = torch.cat([torch.full((1, 4, width), v) for v in (-1e4, 0.0, 1e4)])
    std = first._learned_std(extreme)
    assert std.shape == (3, 4, first.flow.network.config.action_dim)
    std = std.detach()
    assert float(std.min()) >= RANGE[0] * (1 - 1e-5) and float(std.max()) <= RANGE[1] * (1 + 1e-5)


def test_training_moves_the_noise_head_and_the_state_dict_carries_it(make_policy, rollout) -> None:
    policy = _noise_policy(make_policy)
    policy.train()
    _, result = rollout(policy, 1)
    out = policy(forward_inputs=result["forward_inputs"], compute_logprobs=True,
                 compute_entropy=True, compute_values=False)
    (out["logprobs"].mean() + out["entropy"].mean()).backward()
    grads = [p.grad for p in policy.noise_head.parameters()]
    assert all(g is not None and g.abs().sum() > 0 for g in grads)
    keys = [k for k in policy.state_dict() if k.startswith("noise_head.")]
    assert any(k.endswith("weight") for k in keys) and "noise_head.logvar_min" in keys


def test_deterministic_evaluation_never_calls_the_noise_head(make_policy, rollout) -> None:
    plain = make_policy()
    noisy = _noise_policy(make_policy)
    noisy.load_state_dict(plain.state_dict(), strict=False)
    calls = []
    noisy.noise_head.register_forward_hook(lambda *_: calls.append(1))
    want, _ = rollout(plain, 2, mode="eval")
    got, result = rollout(noisy, 2, mode="eval")
    assert torch.equal(got, want) and not calls
    assert not result["prev_logprobs"].any()


@pytest.mark.parametrize("model", ["pi0"], indirect=True)
def test_rlinf_get_model_builds_the_head_from_the_config(model_cfg) -> None:
    from rlinf.models import get_model

    from dexrl.bridge import registry

    registry.register()
    built = get_model(model_cfg("dexbotic.noise_method=flow_noise",
                                "dexbotic.noise_logvar_range=[0.3,0.6]"))
    assert built.has_noise_head
    assert torch.allclose(built.noise_head.logvar_max.exp().sqrt(), torch.tensor([0.6]))
    assert not get_model(model_cfg()).has_noise_head
