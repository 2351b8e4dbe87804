"""The training prefix cache: PPO epochs that reuse each sample's frozen prefix give the same
losses, log-probs, values, entropies and gradients as recomputing it (fp32, CPU), and the cache
is dropped at every new global step and on new weights."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers.adapters import ADAPTERS

from dexrl.bridge.policies.chain import RLSettings
from dexrl.bridge.policies.flow import FlowRLPolicy
from dexrl.bridge.policies.pi0 import Pi0RLPolicy
from dexrl.bridge.policies.prefix_cache import PrefixCacheSettings, new_sample_ids
from dexrl.checkpoints.policy import load_policy
from dexrl.errors import DexrlError

RECOMPUTE = PrefixCacheSettings(device_gb=0.0, host_gb=0.0)
TOLERANCE = {"rtol": 0.0, "atol": 1e-6}
CALLS, BATCH, MICRO, EPOCHS = 3, 4, 3, 3


def _env_obs(batch: int, seed: int, size: int) -> dict:
    rng = np.random.default_rng(seed)
    tasks = ["pick up the black bowl and place it on the plate", "open the top drawer",
             "turn on the stove"]
    return {"main_images": rng.integers(0, 256, (batch, size, size, 3), dtype=np.uint8),
            "wrist_images": rng.integers(0, 256, (batch, size, size, 3), dtype=np.uint8),
            "states": torch.from_numpy(rng.normal(size=(batch, 8))),
            "task_descriptions": [tasks[i % len(tasks)] for i in range(batch)]}


def _pair(kind: str, path: Path, cache: PrefixCacheSettings | None = None,
          **settings) -> tuple[FlowRLPolicy, FlowRLPolicy]:
    """The same policy twice: with a prefix cache (``cache``, default budgets) and without."""
    cls = ADAPTERS[kind]
    rl = RLSettings(num_steps=3, num_action_chunks=5, detach_critic_input=False, **settings)
    cached, plain = (cls(load_policy(path), rl, c) for c in (cache, RECOMPUTE))
    for policy in (cached, plain):  # a value head that is not near zero
        generator = torch.Generator().manual_seed(7)
        policy.value_head.weight.data = torch.randn(policy.value_head.weight.shape,
                                                    generator=generator)
    assert cached.prefix_store is not None and plain.prefix_store is None
    return cached, plain


def _rollouts(policy: FlowRLPolicy, size: int) -> dict[str, torch.Tensor]:
    """CALLS rollout calls of BATCH rows, concatenated (training's flattened batch)."""
    calls = []
    for seed in range(CALLS):
        torch.manual_seed(seed)
        calls.append(policy.predict_action_batch(_env_obs(BATCH, seed, size), mode="train")[1])
    inputs = {k: torch.cat([c["forward_inputs"][k] for c in calls])
              for k in calls[0]["forward_inputs"]}
    return {"forward_inputs": inputs, "prev_logprobs": torch.cat([c["prev_logprobs"]
                                                                  for c in calls])}


def _train_round(policies: tuple[FlowRLPolicy, FlowRLPolicy], batch: dict, step: int) -> None:
    """One global step on both policies (RLinf's order: step hook, then epochs of shuffled
    micro-batches, an SGD step each), asserting equal outputs and gradients throughout."""
    optimizers = [torch.optim.SGD([p for p in m.parameters() if p.requires_grad], lr=1e-3)
                  for m in policies]
    for policy in policies:
        policy.set_global_step(step)
        policy.train()
    rows = batch["prev_logprobs"].shape[0]
    for epoch in range(EPOCHS):
        # Epoch 0 keeps the order (whole stored blocks); epoch 1 interleaves the halves, so a
        # micro-batch holds rows of one block with another block's row between them.
        shuffled = torch.randperm(rows, generator=torch.Generator().manual_seed(epoch))
        order = [torch.arange(rows), torch.arange(rows).view(2, -1).T.flatten(),
                 shuffled][min(epoch, 2)]
        for micro in order.split(MICRO):
            inputs = {k: v[micro] for k, v in batch["forward_inputs"].items()}
            outs, grads = [], []
            for policy, optimizer in zip(policies, optimizers, strict=True):
                optimizer.zero_grad()
                out = policy(forward_inputs=inputs, compute_logprobs=True,
                             compute_entropy=True, compute_values=True)
                loss = (out["logprobs"].sum() + out["values"].square().sum()
                        + out["entropy"].sum())
                loss.backward()
                outs.append({**out, "loss": loss.detach()})
                grads.append({n: p.grad.clone() for n, p in policy.named_parameters()
                              if p.grad is not None})
                torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
                optimizer.step()
            for key in ("loss", "logprobs", "values", "entropy"):
                torch.testing.assert_close(outs[0][key], outs[1][key], **TOLERANCE)
            assert grads[0].keys() == grads[1].keys() and grads[0]
            for name, grad in grads[0].items():
                torch.testing.assert_close(grad, grads[1][name], **TOLERANCE)


def _perturb_frozen(policies: tuple[FlowRLPolicy, ...]) -> None:
    """The same in-place change of the frozen LLM's weights in both policies."""
    for policy in policies:
        with torch.no_grad():
            for param in policy.model.llm.parameters():
                param.mul_(1.5)


@pytest.mark.parametrize(("model", "method"), [("pi0", "flow_sde"), ("pi0", "flow_cps"),
                                               ("dm0", "flow_sde")], indirect=["model"])
def test_reused_prefix_trains_like_the_recomputed_one(model: str, method: str,
                                                      model_dir: Path) -> None:
    policies = _pair(model, model_dir, noise_method=method, ignore_last=method == "flow_cps")
    cached = policies[0]
    size = cached.flow.images.size[0]
    batch = _rollouts(cached, size)
    samples = batch["prev_logprobs"].shape[0]

    first = cached(forward_inputs=batch["forward_inputs"])  # the first ratio is exactly 1
    assert torch.equal(first["logprobs"], batch["prev_logprobs"])
    cached.release_prefix_cache()

    store = cached.prefix_store
    _train_round(policies, batch, step=0)
    # One prefix pass per sample per global step; every later use is served from the store.
    assert (store.computed_rows, store.reused_rows) == (2 * samples, (EPOCHS - 1) * samples)
    assert len(store) == samples

    # A new global step drops the caches: after a change of the frozen weights (which training
    # never makes, but a checkpoint could) the cached policy still matches the recomputing one.
    _perturb_frozen(policies)
    _train_round(policies, batch, step=1)
    assert store.computed_rows == 3 * samples
    cached.release_prefix_cache()
    assert len(store) == 0


def test_new_weights_drop_the_caches(tiny_pi0_dir: Path) -> None:
    cached, _ = _pair("pi0", tiny_pi0_dir)
    batch = _rollouts(cached, cached.flow.images.size[0])["forward_inputs"]
    cached.set_global_step(5)
    before = cached(forward_inputs=batch)["logprobs"]
    assert len(cached.prefix_store) == CALLS * BATCH
    state = {k: v * 1.5 if k.startswith("model.llm.") else v
             for k, v in cached.state_dict().items()}
    cached.load_state_dict(state)  # same global step, new weights
    assert len(cached.prefix_store) == 0
    after = cached(forward_inputs=batch)["logprobs"]
    assert not torch.allclose(before, after)


@pytest.mark.parametrize("budget", ["host", "part"])
def test_budgets_spill_to_host_then_recompute(budget: str, tiny_pi0_dir: Path) -> None:
    probe, _ = _pair("pi0", tiny_pi0_dir)
    batch = _rollouts(probe, probe.flow.images.size[0])
    probe(forward_inputs=batch["forward_inputs"])
    row_gb = probe.prefix_store._bytes[False] / (CALLS * BATCH) / 1e9
    # "host": nothing on the device, everything on the host; "part": 5 rows on the device, 2 on
    # the host, the rest recomputed at every use.
    cache = (PrefixCacheSettings(device_gb=0.0, host_gb=math.inf) if budget == "host" else
             PrefixCacheSettings(device_gb=5.5 * row_gb, host_gb=2.5 * row_gb))
    policies = _pair("pi0", tiny_pi0_dir, cache)
    _train_round(policies, batch, step=0)
    store = policies[0].prefix_store
    stored = CALLS * BATCH if budget == "host" else 7
    assert len(store) == stored
    assert (store._bytes[False] > 0) == (budget == "part")
    assert store.reused_rows == (EPOCHS - 1) * stored


def test_no_caching_without_ids_in_inference_mode_or_when_training_all(tiny_pi0_dir: Path) -> None:
    cached, _ = _pair("pi0", tiny_pi0_dir)
    inputs = _rollouts(cached, cached.flow.images.size[0])["forward_inputs"]
    with torch.inference_mode():  # its tensors could not serve a later training call
        cached(forward_inputs=inputs)
    del inputs["sample_ids"]
    cached(forward_inputs=inputs)
    assert len(cached.prefix_store) == 0 and cached.prefix_store.computed_rows == 0
    full = Pi0RLPolicy(load_policy(tiny_pi0_dir), RLSettings(num_steps=3, num_action_chunks=5,
                                                             train_expert_only=False))
    assert full.prefix_store is None


def test_sample_ids_are_unique_and_leave_the_sampling_noise_alone() -> None:
    torch.manual_seed(0)
    ids = torch.cat([new_sample_ids(4), new_sample_ids(3)])
    drawn = torch.randn(3)
    torch.manual_seed(0)
    assert torch.equal(drawn, torch.randn(3))
    assert ids.dtype == torch.long and ids.unique().numel() == 7


@pytest.mark.parametrize(("section", "where"), [
    ({"device_gb": -1}, "device_gb"), ({"host_gb": "lots"}, "host_gb"),
    ({"device_gb": True}, "device_gb")])
def test_bad_budgets_fail_clearly(section: dict, where: str) -> None:
    with pytest.raises(DexrlError) as info:
        PrefixCacheSettings.from_model_cfg({"dexbotic": {"prefix_cache": section}})
    assert info.value.where == f"actor.model.dexbotic.prefix_cache.{where}"
    assert PrefixCacheSettings.from_model_cfg({}) == PrefixCacheSettings()


def test_a_full_gpu_spills_to_the_host(tiny_pi0_dir: Path, monkeypatch) -> None:
    """Where the GPU has no room left (device_room, fed by the driver's free memory on CUDA), the
    device budget does not apply and the caches go to the host tier."""
    from dexrl.bridge.policies import prefix_cache

    monkeypatch.setattr(prefix_cache, "device_room", lambda device: 0.0)
    cached, _ = _pair("pi0", tiny_pi0_dir, PrefixCacheSettings(device_gb=8.0, host_gb=1.0))
    cached(forward_inputs=_rollouts(cached, cached.flow.images.size[0])["forward_inputs"])
    store = cached.prefix_store
    assert len(store) == CALLS * BATCH and store._bytes == {False: 0, True: store._bytes[True]}
    assert prefix_cache.device_room(torch.device("cpu")) == 0.0  # patched
    monkeypatch.undo()
    assert prefix_cache.device_room(torch.device("cpu")) == float("inf")


def test_release_reaches_the_policy_inside_an_fsdp1_wrapper(tiny_pi0_dir: Path) -> None:
    from types import SimpleNamespace

    from dexrl.bridge.policies.prefix_cache import release_prefix_cache

    cached, _ = _pair("pi0", tiny_pi0_dir)
    cached(forward_inputs=_rollouts(cached, cached.flow.images.size[0])["forward_inputs"])
    assert len(cached.prefix_store) > 0
    release_prefix_cache(SimpleNamespace(module=cached))
    assert len(cached.prefix_store) == 0
    release_prefix_cache(torch.nn.Linear(1, 1))  # a policy without a cache: nothing to do


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_reused_prefix_on_cuda_in_bf16(tiny_pi0_dir: Path) -> None:
    """On the GPU in bf16: the reused prefix gives the log-probs of its first use exactly and the
    recomputing policy's to bf16 noise; the first ratio stays 1."""
    rl = RLSettings(num_steps=3, num_action_chunks=5)
    cached, plain = (Pi0RLPolicy(load_policy(tiny_pi0_dir, device="cuda", dtype=torch.bfloat16),
                                 rl, cache) for cache in (None, RECOMPUTE))
    torch.manual_seed(0)
    _, result = cached.predict_action_batch(_env_obs(BATCH, 0, cached.flow.images.size[0]),
                                            mode="train")
    inputs = {k: v.cuda() for k, v in result["forward_inputs"].items()}
    cached.set_global_step(0)
    first, second = (cached(forward_inputs=inputs)["logprobs"] for _ in range(2))
    assert cached.prefix_store.reused_rows == BATCH
    assert torch.equal(first, second)
    torch.testing.assert_close(first, result["prev_logprobs"], rtol=0, atol=2e-2)
    torch.testing.assert_close(plain(forward_inputs=inputs)["logprobs"], first, rtol=0,
                               atol=2e-2)
