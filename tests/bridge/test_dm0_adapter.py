"""dexrl's RLinf DM0 adapter on the tiny checkpoint: what DM0 changes in the shared flow adapter.

The adapter maths are π0's (``tests/bridge/test_pi0_adapter.py`` covers them in depth); these
tests check that they hold for DM0's network (no state token, causal prefix, PE tower, Qwen3 MoT),
its loader settings (prompt length, norm mode, fp32-kept weights in bf16), its freezing and its
registration in place of RLinf's built-in ``dexbotic_dm0``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from dexrl.bridge.policies.chain import RLSettings
from dexrl.bridge.policies.dm0 import Dm0RLPolicy, build
from dexrl.checkpoints.policy import load_policy
from dexrl.errors import DexrlError
from dexrl.models.dm0.loader import keeps_float32
from dexrl.models.dm0.tiny import TINY_PROMPT_LENGTH, TINY_VISION, write_tiny_dm0

CHUNK = 8  # chunk_size of the tiny checkpoint
CONF_MODEL = Path(__file__).resolve().parents[2] / "conf" / "model" / "dexbotic_dm0.yaml"
TRAINABLE_PREFIXES = ("model.action_expert.", "model.action_in_proj.",
                      "model.action_time_mlp_in.", "model.action_time_mlp_out.",
                      "model.action_out_proj.", "value_head.")
FROZEN_PREFIXES = ("model.mm_vision_tower.vision_tower.transformer.",
                   "model.mm_vision_tower.vision_tower.vit_downsampler1.",
                   "model.mm_vision_tower.vision_tower.vit_downsampler2.",
                   "model.mm_projector.", "model.llm.layers.")


@pytest.fixture(scope="module")
def tiny_dm0_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random DM0 checkpoint (fp32, prompt length 64). Treat it as read-only."""
    return write_tiny_dm0(tmp_path_factory.mktemp("tiny_dm0_adapter") / "ckpt", seed=0)


def _env_obs(batch: int = 3, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    tasks = ["pick up the black bowl and place it on the plate", "open the top drawer",
             "put the_butter in the basket\n", "turn on the stove"]
    return {
        "main_images": rng.integers(0, 256, (batch, 64, 64, 3), dtype=np.uint8),
        "wrist_images": torch.from_numpy(rng.integers(0, 256, (batch, 64, 64, 3), dtype=np.uint8)),
        "states": torch.from_numpy(rng.normal(size=(batch, 8))),  # float64, as LIBERO sends
        "task_descriptions": [tasks[i % len(tasks)] for i in range(batch)],
    }


def _randomize_value_head(policy: Dm0RLPolicy) -> Dm0RLPolicy:
    generator = torch.Generator().manual_seed(7)
    weight = policy.value_head.weight
    weight.data = torch.randn(weight.shape, generator=generator).to(weight.dtype)
    return policy


@pytest.fixture
def make_policy(tiny_dm0_dir: Path) -> Callable[..., Dm0RLPolicy]:
    """Build a fresh adapter (own weights) with a random value head; kwargs go to RLSettings."""

    def make(dtype: torch.dtype | None = None, **settings) -> Dm0RLPolicy:
        settings = {"num_steps": 3, "num_action_chunks": 5, **settings}
        policy = Dm0RLPolicy(load_policy(tiny_dm0_dir, dtype=dtype), RLSettings(**settings))
        return _randomize_value_head(policy)

    return make


def _model_cfg(tiny_dm0_dir: Path, *overrides: str):
    """The shipped DM0 model group pointed at the tiny checkpoint, plus dotlist overrides."""
    cfg = OmegaConf.load(CONF_MODEL)
    cfg.model_path = str(tiny_dm0_dir)
    cfg.num_action_chunks = 5
    cfg.num_steps = 3
    return OmegaConf.merge(cfg, OmegaConf.from_dotlist(list(overrides)))


def _rollout(policy: Dm0RLPolicy, seed: int, batch: int = 3, obs_seed: int | None = None,
             **kwargs):
    """One rollout call with the global RNG seeded by ``seed`` (observations by ``obs_seed``)."""
    torch.manual_seed(seed)
    return policy.predict_action_batch(_env_obs(batch, seed if obs_seed is None else obs_seed),
                                       **kwargs)


@pytest.mark.parametrize(("method", "joint"), [("flow_sde", False), ("flow_cps", True)])
def test_training_forward_reproduces_rollout_exactly(make_policy, method: str, joint: bool) -> None:
    policy = make_policy(noise_method=method, joint_logprob=joint, ignore_last=joint)
    policy.train()
    for seed in range(3):
        _, result = _rollout(policy, seed)
        out = policy(forward_inputs=result["forward_inputs"], compute_logprobs=True,
                     compute_entropy=True, compute_values=True, use_cache=False)
        assert torch.equal(out["logprobs"], result["prev_logprobs"])
        assert torch.equal(out["values"], result["prev_values"][:, 0])
        assert result["prev_logprobs"].abs().min() > 0 and result["prev_values"].abs().min() > 0
        assert out["entropy"].shape == (3, 1) and torch.isfinite(out["entropy"]).all()


def test_forward_inputs_have_dm0_shapes(make_policy) -> None:
    actions, result = _rollout(make_policy(), 0, batch=2)
    size = TINY_VISION.image_size
    expected = {
        "images": ((2, 2, size, size, 3), torch.uint8),
        "tokens": ((2, TINY_PROMPT_LENGTH), torch.int64),
        "token_mask": ((2, TINY_PROMPT_LENGTH), torch.bool),
        "state": ((2, 32), torch.float32),
        "sample_ids": ((2,), torch.int64),
        "chains_bits": ((2, 4, CHUNK, 32), torch.int32),
        "denoise_inds": ((2, 1), torch.int64),
    }
    inputs = result["forward_inputs"]
    assert {k: (tuple(v.shape), v.dtype) for k, v in inputs.items()} == expected
    assert actions.shape == (2, 5, 7) and result["prev_values"].shape == (2, 1)


@pytest.mark.parametrize("norm_mode", ["mean_std", "quantile"])
def test_eval_is_deterministic_and_equals_the_inference_policy(tiny_dm0_dir, norm_mode) -> None:
    """Built from the shipped config (prompt length 200, not the checkpoint's 64): the padding
    is masked, so eval actions equal ``load_policy(...).predict`` with the checkpoint's length."""
    policy = build(_model_cfg(tiny_dm0_dir, f"dexbotic.norm_mode={norm_mode}"))
    assert policy.dm0.tokenizer.model_max_length == 200 and policy.dm0.norm_mode == norm_mode
    first_actions, first = _rollout(policy, 0, do_sample=False)
    again_actions, again = _rollout(policy, 1, obs_seed=0, do_sample=False)  # other RNG state
    assert torch.equal(first_actions, again_actions)
    assert torch.equal(first["forward_inputs"]["chains_bits"],
                       again["forward_inputs"]["chains_bits"])
    assert torch.equal(first["prev_logprobs"], torch.zeros(3, 5, 7))
    assert first["forward_inputs"]["tokens"].shape == (3, 200)
    assert not torch.allclose(_rollout(policy, 0, do_sample=True)[0], first_actions)

    noise = torch.randn(3, CHUNK, 32, generator=torch.Generator().manual_seed(5))
    actions, _ = policy.predict_action_batch(_env_obs(3), mode="eval", noise=noise)
    reference = load_policy(tiny_dm0_dir, norm_mode=norm_mode).predict(
        _env_obs(3), noise=noise, num_steps=3, num_action_chunks=5)
    torch.testing.assert_close(actions, reference["actions"], rtol=1e-5, atol=1e-5)


def test_norm_modes_give_different_actions(tiny_dm0_dir) -> None:
    """The configured mode reaches the transforms (the test above would pass if it did not)."""
    noise = torch.randn(2, CHUNK, 32, generator=torch.Generator().manual_seed(1))
    actions = [build(_model_cfg(tiny_dm0_dir, f"dexbotic.norm_mode={mode}"))
               .predict_action_batch(_env_obs(2), mode="eval", noise=noise)[0]
               for mode in ("mean_std", "quantile")]
    assert not torch.allclose(actions[0], actions[1])


def test_train_expert_only_freezes_tower_downsamplers_projector_and_llm(make_policy) -> None:
    policy = make_policy(train_expert_only=True, detach_critic_input=False)
    names = {n for n, _ in policy.named_parameters()}
    trainable = {n for n, p in policy.named_parameters() if p.requires_grad}
    assert trainable == {n for n in names if n.startswith(TRAINABLE_PREFIXES)}
    assert all(any(n.startswith(p) for n in names) for p in FROZEN_PREFIXES)
    assert not any(n.startswith("model.state_proj") for n in names)  # DM0 has no state token
    policy.train()
    out = policy(forward_inputs=_rollout(policy, 3)[1]["forward_inputs"])
    (out["logprobs"].sum() + out["values"].sum()).backward()
    assert {n for n, p in policy.named_parameters() if p.grad is not None} == trainable

    full = make_policy(train_expert_only=False)
    full.train()
    out = full(forward_inputs=_rollout(full, 3)[1]["forward_inputs"])
    out["logprobs"].sum().backward()
    grads = {n for n, p in full.named_parameters() if p.grad is not None}
    for prefix in FROZEN_PREFIXES:
        assert any(n.startswith(prefix) for n in grads), prefix


def test_norm_mode_must_match_the_loaded_policy(tiny_dm0_dir) -> None:
    with pytest.raises(DexrlError, match="normalizes with 'mean_std'") as info:
        Dm0RLPolicy(load_policy(tiny_dm0_dir),
                    RLSettings(num_action_chunks=5, norm_mode="quantile"))
    assert info.value.code == "policy-norm-mode-mismatch"
    assert info.value.where == "actor.model.dexbotic.norm_mode"


@pytest.mark.parametrize(("precision", "dtypes"), [("fp32", {torch.float32}),
                                                   ("bf16", {torch.bfloat16, torch.float32})])
def test_rlinf_get_model_builds_dexrl_dm0_not_the_builtin(tiny_dm0_dir, precision, dtypes) -> None:
    import rlinf.models

    from dexrl.bridge import registry

    assert "dexbotic_dm0" in registry.register()
    assert registry.registered_model_types(["dexbotic_dm0"]) == ["dexbotic_dm0"]
    cfg = _model_cfg(tiny_dm0_dir, f"precision={precision}")
    model = rlinf.models.get_model(cfg)
    assert isinstance(model, Dm0RLPolicy)
    assert {p.dtype for p in model.parameters()} == dtypes
    if precision == "bf16":  # DM0's rule: vision stem, position embedding, RMSNorms stay fp32
        fp32 = {n for n, p in model.named_parameters() if p.dtype == torch.float32}
        assert fp32 and fp32 == {n for n, _ in model.named_parameters() if keeps_float32(n)}
    assert model.settings.num_steps == cfg.num_steps and not model.has_value_head
    actions, result = model.predict_action_batch(_env_obs(2))
    assert actions.shape == (2, 5, cfg.action_dim)
    assert result["prev_logprobs"].dtype == torch.float32


def test_bad_settings_fail_clearly(tiny_dm0_dir, tiny_pi0_dir) -> None:
    cases = [
        (("dexbotic.model_max_length=0",), "actor.model.dexbotic.model_max_length"),
        (("dexbotic.model_max_length=long",), "actor.model.dexbotic.model_max_length"),
        (("dexbotic.norm_mode=min_max",), "actor.model.dexbotic.norm_mode"),
        (("num_action_chunks=9",), "actor.model.num_action_chunks"),
        ((f"model_path={tiny_pi0_dir}",), str(tiny_pi0_dir / "config.json")),
    ]
    for overrides, where in cases:
        with pytest.raises(DexrlError) as info:
            build(_model_cfg(tiny_dm0_dir, *overrides))
        assert info.value.where == where
    assert "model_type=dexbotic_pi0" in info.value.hint


@contextlib.contextmanager
def _single_process_group(tmp_path: Path) -> Iterator[None]:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0,
                            world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def _fsdp2(policy: Dm0RLPolicy, dtype: torch.dtype) -> Dm0RLPolicy:
    """Wrap with RLinf's own FSDP2 code, with mixed precision as RLinf's actor sets it."""
    from rlinf.hybrid_engines.fsdp.utils import apply_fsdp2_to_model
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, OffloadPolicy

    precision = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=dtype,
                                     cast_forward_inputs=True)
    return apply_fsdp2_to_model(policy, {}, init_device_mesh("cpu", (1,)), precision,
                                OffloadPolicy(), reshard_after_forward=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fsdp2_training_reproduces_the_rollout(make_policy, tmp_path: Path, dtype) -> None:
    """DM0's units gather their shards; in fp32 the first ratio is exactly 1. In bf16 the fp32
    RMSNorms get units of their own (FSDP2 fails otherwise) and FSDP computes them in bf16, so
    the re-scored log-probs are only close to the rollout's."""
    from torch.distributed.fsdp import FSDPModule

    _, result = _rollout(make_policy(dtype), 3)
    with _single_process_group(tmp_path):
        model = _fsdp2(make_policy(dtype), dtype)
        units = {type(m).__name__ for m in model.modules() if isinstance(m, FSDPModule)}
        # FSDP2 renames the classes it wraps.
        assert {"FSDPQwen3MLP", "FSDPPeResidualBlock", "FSDPDm0RMSNorm"} <= units
        model.train()
        out = model(forward_inputs=result["forward_inputs"], compute_values=True)
        if dtype == torch.float32:
            assert torch.equal(out["logprobs"], result["prev_logprobs"])
            assert torch.equal(out["values"], result["prev_values"][:, 0])
        else:
            torch.testing.assert_close(out["logprobs"], result["prev_logprobs"], rtol=0,
                                       atol=2e-2)
        (out["logprobs"].sum() + out["values"].sum()).backward()
        grads = {n for n, p in model.named_parameters() if p.grad is not None}
        assert grads and all(n.startswith(TRAINABLE_PREFIXES) for n in grads)
