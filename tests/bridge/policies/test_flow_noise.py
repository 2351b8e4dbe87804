"""flow_noise (πRL's Flow-Noise) in dexrl's adapters: the noise head as RLinf's openpi builds it,
log-probabilities and entropy against an independent computation, gradients into the head, the
deterministic evaluation that never calls it, and its place in the state dict."""

from __future__ import annotations

import math

import pytest
import torch
from torch.distributions import Normal

from dexrl.bridge.policies.chain import unpack_chains
from dexrl.bridge.policies.flow import NOISE_HEAD_HIDDEN
from dexrl.models.flow.sampling import time_grid

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
