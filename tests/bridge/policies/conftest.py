"""Fixtures of the adapter tests: fresh RLinf adapters of the tiny π0 and DM0 (``model``, from
tests/conftest.py, picks which), rollout calls on RLinf-style observations, and the shipped model
configs pointed at the tiny checkpoints."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from helpers.adapters import ADAPTERS, FRAME, NUM_STEPS
from helpers.env_obs import rlinf_obs
from omegaconf import DictConfig, OmegaConf

from dexrl.bridge.policies.chain import RLSettings
from dexrl.bridge.policies.flow import FlowRLPolicy
from dexrl.checkpoints.policy import load_policy

CONF_MODEL = Path(__file__).resolve().parents[3] / "conf" / "model"


@pytest.fixture
def make_policy(model: str, model_dir: Path) -> Callable[..., FlowRLPolicy]:
    """Build a fresh adapter (own weights) with a random value head; kwargs go to RLSettings."""

    def make(dtype: torch.dtype | None = None, **settings) -> FlowRLPolicy:
        settings = {"num_steps": NUM_STEPS[model], "num_action_chunks": 5, **settings}
        policy = ADAPTERS[model](load_policy(model_dir, dtype=dtype), RLSettings(**settings))
        if policy.has_value_head:
            generator = torch.Generator().manual_seed(7)
            weight = policy.value_head.weight
            weight.data = torch.randn(weight.shape, generator=generator).to(weight.dtype)
        return policy

    return make


@pytest.fixture
def make_env_obs(model: str) -> Callable[..., dict]:
    """``make_env_obs(batch=3, seed=0)``: observations as RLinf's LIBERO env worker sends them."""
    return lambda batch=3, seed=0: rlinf_obs(batch, seed, FRAME[model])


@pytest.fixture
def rollout(make_env_obs: Callable[..., dict]) -> Callable[..., tuple]:
    """``rollout(policy, seed, batch=3, obs_seed=None, **kwargs)``: one rollout call with the
    global RNG seeded by ``seed`` (the observations by ``obs_seed``, default ``seed``)."""

    def call(policy: FlowRLPolicy, seed: int, batch: int = 3, obs_seed: int | None = None,
             **kwargs) -> tuple:
        torch.manual_seed(seed)
        obs = make_env_obs(batch, seed if obs_seed is None else obs_seed)
        return policy.predict_action_batch(obs, **kwargs)

    return call


@pytest.fixture
def model_cfg(model: str, model_dir: Path) -> Callable[..., DictConfig]:
    """``model_cfg(*overrides)``: the shipped model group pointed at the tiny checkpoint (5 action
    chunks, 3 denoising steps), plus dotlist overrides."""

    def cfg(*overrides: str) -> DictConfig:
        cfg = OmegaConf.load(CONF_MODEL / f"dexbotic_{model}.yaml")
        cfg.model_path = str(model_dir)
        cfg.num_action_chunks = 5
        cfg.num_steps = 3
        return OmegaConf.merge(cfg, OmegaConf.from_dotlist(list(overrides)))

    return cfg
