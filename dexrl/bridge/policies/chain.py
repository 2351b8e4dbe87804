"""PPO over a flow-matching denoising chain: which steps are stochastic, sampling, re-scoring.

Design notes: docs/design/policy-adapters.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from dexrl.errors import DexrlError
from dexrl.models.choices import NOISE_METHODS, NORM_MODES
from dexrl.models.flow.sampling import gaussian_logprob, sde_sigma, step_moments, time_grid

# denoise(x_t float32 [B, T, D], t [B]) -> (velocity [B, T, D], action-token hidden [B, T, W]).
Denoiser = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]
# learned_std(action-token hidden [B, T, W]) -> std float32 [B, T, D] (flow_noise's noise head).
LearnedStd = Callable[[torch.Tensor], torch.Tensor]

# flow_noise's std range [min, max] (RLinf's OpenPi0Config.noise_logvar_range, πRL's default).
NOISE_STD_RANGE = (0.08, 0.16)
NOT_SCORED = -1  # denoise_inds of deterministic (eval) calls: nothing to re-score
_HALF_LOG_2PI_E = 0.5 * math.log(2.0 * math.pi * math.e)
# Model config keys of RLinf's Dexbotic adapters that dexrl does not implement; each must be
# absent or false (value: why).
_UNSUPPORTED = {
    "safe_get_logprob": "the squared-error surrogate is not a log-prob",
    "noise_anneal": "noise annealing is not implemented",
    "value_after_vlm": "the value head reads the action expert",
}


@dataclass(frozen=True)
class RLSettings:
    """RL settings of a Dexbotic policy adapter, read from RLinf's model config.

    Attributes:
        num_steps: Denoising steps per action chunk.
        noise_method: ``flow_sde``, ``flow_cps`` or ``flow_noise`` (a learned noise head gives
            each scored step's std) for the scored steps.
        noise_level: Noise scale of the scored steps (``flow_cps``: the angle fraction, <= 1;
            unused by ``flow_noise``).
        noise_std_range: ``flow_noise``'s [min, max] std (``noise_logvar_range``).
        joint_logprob: Score every (non-ignored) step instead of one random step.
        ignore_last: Never make the last step stochastic (nor score it).
        num_action_chunks: Leading actions of a chunk that are executed and scored.
        env_action_dim: Leading action dims the environment takes.
        add_value_head: Whether the policy has a critic head.
        detach_critic_input: Stop value gradients at the critic's input.
        train_expert_only: Freeze vision tower, projector and LLM.
        norm_mode: ``mean_std`` or ``quantile`` state/action normalization.
    """

    num_steps: int = 10
    noise_method: str = "flow_sde"
    noise_level: float = 0.5
    noise_std_range: tuple[float, float] = NOISE_STD_RANGE
    joint_logprob: bool = False
    ignore_last: bool = False
    num_action_chunks: int = 10
    env_action_dim: int = 7
    add_value_head: bool = True
    detach_critic_input: bool = False
    train_expert_only: bool = True
    norm_mode: str = "mean_std"

    @classmethod
    def from_model_cfg(cls, cfg: Mapping[str, Any]) -> RLSettings:
        """Read RLinf's ``actor.model`` keys (``dexbotic.*`` for the Dexbotic-specific ones).

        Raises:
            DexrlError: a value out of range, or an RLinf option dexrl does not implement.
        """
        dex = cfg.get("dexbotic", None) or {}
        for key, why in _UNSUPPORTED.items():
            if cfg.get(key, False):
                raise DexrlError(f"{key} is not supported ({why})", hint=f"set {key}: false",
                                 where=f"actor.model.{key}", code="policy-setting-unsupported")
        settings = cls(
            num_steps=int(cfg.get("num_steps", cls.num_steps)),
            noise_method=str(dex.get("noise_method", cls.noise_method)),
            noise_level=float(dex.get("noise_level", cls.noise_level)),
            noise_std_range=_std_range(dex.get("noise_logvar_range", cls.noise_std_range)),
            joint_logprob=bool(cfg.get("joint_logprob", cls.joint_logprob)),
            ignore_last=bool(cfg.get("ignore_last", cls.ignore_last)),
            num_action_chunks=int(cfg.get("num_action_chunks", cls.num_action_chunks)),
            env_action_dim=int(cfg.get("action_dim", cls.env_action_dim)),
            add_value_head=bool(cfg.get("add_value_head", cls.add_value_head)),
            detach_critic_input=bool(dex.get("detach_critic_input", cls.detach_critic_input)),
            train_expert_only=bool(dex.get("train_expert_only", cls.train_expert_only)),
            norm_mode=str(dex.get("norm_mode", cls.norm_mode)),
        )
        settings.check()
        return settings

    def check(self, chunk_size: int | None = None, model_action_dim: int | None = None) -> None:
        """Validate ranges; with the model's sizes also the chunk and action slices."""
        problems = []
        if self.num_steps < 1 or (self.ignore_last and self.num_steps < 2):
            problems.append(("num_steps", f"{self.num_steps} leaves no stochastic step",
                             "use num_steps >= 1 (>= 2 with ignore_last)"))
        if self.noise_method not in NOISE_METHODS:
            problems.append(("dexbotic.noise_method", f"unknown noise method "
                             f"{self.noise_method!r}", f"use one of {', '.join(NOISE_METHODS)}"))
        upper = 1.0 if self.noise_method == "flow_cps" else math.inf
        if not 0.0 <= self.noise_level <= upper:
            problems.append(("dexbotic.noise_level", f"{self.noise_level} is out of range",
                             "use a value >= 0 (<= 1 for flow_cps)"))
        low, high = self.noise_std_range
        if not 0.0 < low <= high:
            problems.append(("dexbotic.noise_logvar_range", f"[{low}, {high}] is not a std range",
                             "use [min_std, max_std] with 0 < min_std <= max_std"))
        if self.norm_mode not in NORM_MODES:
            problems.append(("dexbotic.norm_mode", f"unknown norm mode {self.norm_mode!r}",
                             f"use one of {', '.join(NORM_MODES)}"))
        if not 0 < self.num_action_chunks <= (chunk_size or self.num_action_chunks):
            problems.append(("num_action_chunks", f"{self.num_action_chunks} does not fit the "
                             f"model's chunk of {chunk_size}", f"use 1..{chunk_size}"))
        if not 0 < self.env_action_dim <= (model_action_dim or self.env_action_dim):
            problems.append(("action_dim", f"{self.env_action_dim} does not fit the model's "
                             f"{model_action_dim}-d actions", f"use 1..{model_action_dim}"))
        if problems:
            key, message, hint = problems[0]
            raise DexrlError(message, hint=hint, where=f"actor.model.{key}",
                             details=[f"actor.model.{k}: {m}" for k, m, _ in problems[1:]],
                             code="policy-setting-out-of-range")

    @property
    def stochastic_steps(self) -> int:
        """How many leading steps may be stochastic (all but the last with ``ignore_last``)."""
        return self.num_steps - int(self.ignore_last)

    @property
    def scored_per_call(self) -> int:
        """Width S of ``denoise_inds``: every stochastic step when joint, else one."""
        return self.stochastic_steps if self.joint_logprob else 1

    def draw_scored_steps(self, batch: int) -> torch.Tensor:
        """Scored step indices long [batch, S], drawn once per call and shared by the batch."""
        if self.joint_logprob:
            steps = torch.arange(self.stochastic_steps)
        else:
            steps = torch.randint(0, self.stochastic_steps, (1,))
        return steps.expand(batch, -1).clone()

    def unscored(self, batch: int) -> torch.Tensor:
        """``denoise_inds`` of a deterministic call: [batch, S] filled with ``NOT_SCORED``."""
        return torch.full((batch, self.scored_per_call), NOT_SCORED, dtype=torch.long)


@dataclass
class ChainSample:
    """A sampled denoising chain.

    Attributes:
        chains: float32 [B, N+1, T, D], x at every grid time (index 0 = the initial noise).
        logprobs: float32 [B, T, D], per element mean log-prob over the scored terms (zeros when
            nothing was scored).
        first_hidden: Action-token hidden states of step 0 (t = 1), for the value.
    """

    chains: torch.Tensor
    logprobs: torch.Tensor
    first_hidden: torch.Tensor


@dataclass
class ChainScores:
    """Re-scored stored chains.

    Attributes:
        logprobs: float32 [B, T, D], as :attr:`ChainSample.logprobs`.
        entropy: float32 [B, T, D], mean Gaussian entropy over the same terms (0 where std = 0).
        first_hidden: Step-0 hidden states when requested, else None.
    """

    logprobs: torch.Tensor
    entropy: torch.Tensor
    first_hidden: torch.Tensor | None


def pack_chains(chains: torch.Tensor) -> torch.Tensor:
    """float32 chains -> their int32 bit patterns, for ``forward_inputs``.

    FSDP's mixed precision casts every floating tensor of the root forward's inputs to the
    parameter dtype (FSDP1's ``cast_root_forward_inputs``, FSDP2's ``cast_forward_inputs``); bf16
    chains would change the re-scored log-probs. Integer tensors pass through unchanged.
    """
    return chains.to(torch.float32).contiguous().view(torch.int32)


def unpack_chains(bits: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`pack_chains`."""
    if bits.dtype != torch.int32:
        raise DexrlError(f"forward_inputs chains_bits has dtype {bits.dtype}, expected int32",
                         hint="pass forward_inputs exactly as predict_action_batch returned them",
                         where="forward_inputs.chains_bits", code="policy-forward-inputs-dtype")
    return bits.view(torch.float32)


def gaussian_entropy(std: torch.Tensor) -> torch.Tensor:
    """Elementwise entropy 0.5·log(2πe·std²); 0 where ``std == 0`` (a deterministic element)."""
    degenerate = std == 0
    safe = torch.where(degenerate, torch.ones_like(std), std)
    return torch.where(degenerate, torch.zeros_like(std), torch.log(safe) + _HALF_LOG_2PI_E)


def _std_range(value: Any) -> tuple[float, float]:
    """``noise_logvar_range`` as (min, max) floats.

    Raises:
        DexrlError: not two numbers.
    """
    try:
        low, high = (float(v) for v in value)
    except (TypeError, ValueError):
        raise DexrlError(f"noise_logvar_range is {value!r}, expected [min_std, max_std]",
                         hint="set two numbers, e.g. [0.08, 0.16]",
                         where="actor.model.dexbotic.noise_logvar_range",
                         code="policy-setting-out-of-range") from None
    return low, high


def _moments(
    settings: RLSettings, grid: torch.Tensor, x: torch.Tensor, velocity: torch.Tensor,
    k: torch.Tensor, stochastic: bool, hidden: torch.Tensor | None = None,
    learned_std: LearnedStd | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and std of x at grid step k+1 (k long [B]); rollout and training both use it.

    ``flow_noise`` (πRL's Flow-Noise): the ODE step's mean and the std ``learned_std`` reads
    from the step's action-token ``hidden`` states.
    """
    t, t_next = grid[k], grid[k + 1]
    if not stochastic:
        return step_moments(x, velocity.float(), t, t - t_next, "ode")
    if settings.noise_method == "flow_noise":
        if learned_std is None or hidden is None:
            raise DexrlError("flow_noise needs the policy's noise head",
                             hint="build the adapter with noise_method flow_noise",
                             where="actor.model.dexbotic.noise_method",
                             code="policy-noise-head-missing")
        mean, _ = step_moments(x, velocity.float(), t, t - t_next, "ode")
        return mean, learned_std(hidden).float().expand_as(mean)
    sigma = None
    if settings.noise_method == "flow_sde":
        sigma = sde_sigma(grid, k, settings.noise_level)
    return step_moments(x, velocity.float(), t, t - t_next, settings.noise_method,
                        noise_level=settings.noise_level, sigma=sigma)


def initial_logprob(x: torch.Tensor) -> torch.Tensor:
    """Log-prob of the initial noise under N(0, I) (the joint log-prob's first term)."""
    return gaussian_logprob(x, torch.zeros_like(x), torch.ones_like(x))


def _initial_terms(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`initial_logprob` and the entropy of N(0, I)."""
    return initial_logprob(x), gaussian_entropy(torch.ones_like(x))


def sample_chain(
    denoise: Denoiser, noise: torch.Tensor, settings: RLSettings, scored: torch.Tensor | None,
    learned_std: LearnedStd | None = None,
) -> ChainSample:
    """Run the denoising chain from ``noise`` (x at t = 1, [B, T, D]).

    Args:
        denoise: The policy's velocity function for this batch.
        noise: Initial x.
        settings: Steps and noise method.
        scored: Scored steps long [B, S] from :meth:`RLSettings.draw_scored_steps` (identical
            rows), or None for a fully deterministic ODE chain.
        learned_std: ``flow_noise``'s noise head (unused by the other methods).
    """
    x = noise.to(torch.float32)
    batch = x.shape[0]
    grid = time_grid(settings.num_steps).to(x.device)
    stochastic = set() if scored is None else set(scored[0].tolist())
    terms = [initial_logprob(x)] if stochastic and settings.joint_logprob else []
    chains, first_hidden = [x], None
    for step in range(settings.num_steps):
        k = torch.full((batch,), step, dtype=torch.long, device=x.device)
        velocity, hidden = denoise(x, grid[k])
        if step == 0:
            first_hidden = hidden
        mean, std = _moments(settings, grid, x, velocity, k, step in stochastic, hidden,
                             learned_std)
        if step in stochastic:
            x = mean + std * torch.randn_like(mean)
            terms.append(gaussian_logprob(x, mean, std))
        else:
            x = mean
        chains.append(x)
    logprobs = torch.stack(terms, dim=1).mean(dim=1) if terms else torch.zeros_like(x)
    return ChainSample(torch.stack(chains, dim=1), logprobs, first_hidden)


def score_chain(
    denoise: Denoiser,
    chains: torch.Tensor,
    scored: torch.Tensor,
    settings: RLSettings,
    *,
    first_hidden: bool = False,
    first_hidden_grad: bool = True,
    learned_std: LearnedStd | None = None,
) -> ChainScores:
    """Recompute log-probs (with gradients) of stored chains at their scored steps.

    Args:
        denoise: The policy's velocity function for this batch.
        chains: float32 [B, N+1, T, D] from :func:`sample_chain`.
        scored: long [B, S] scored steps per row (rows may differ after shuffling).
        settings: The settings the chains were sampled with.
        first_hidden: Also return the step-0 hidden states (reused when step 0 is scored for
            every row, else one more denoising pass).
        first_hidden_grad: Whether that extra pass needs a graph.
        learned_std: ``flow_noise``'s noise head (unused by the other methods).

    Raises:
        DexrlError: rows recorded by a deterministic call (nothing to score) or a step index
            outside the chain.
    """
    if (scored < 0).any() or (scored >= settings.stochastic_steps).any():
        raise DexrlError(
            "forward_inputs hold denoise_inds that were not sampled stochastically",
            hint="train only on rollouts collected with sampling on (mode 'train', "
            "do_sample true) and the same num_steps/ignore_last",
            where="forward_inputs.denoise_inds",
            code="policy-forward-inputs-not-stochastic",
        )
    chains = chains.to(torch.float32)
    grid = time_grid(settings.num_steps).to(chains.device)
    rows = torch.arange(chains.shape[0], device=chains.device)
    logprob_terms, entropy_terms, hidden_zero = [], [], None
    if settings.joint_logprob:
        logprob, entropy = _initial_terms(chains[:, 0])
        logprob_terms.append(logprob)
        entropy_terms.append(entropy)
    for column in range(scored.shape[1]):
        k = scored[:, column].to(chains.device)
        velocity, hidden = denoise(chains[rows, k], grid[k])
        mean, std = _moments(settings, grid, chains[rows, k], velocity, k, True, hidden,
                             learned_std)
        logprob_terms.append(gaussian_logprob(chains[rows, k + 1], mean, std))
        entropy_terms.append(gaussian_entropy(std))
        if hidden_zero is None and bool((k == 0).all()):
            hidden_zero = hidden
    if first_hidden and hidden_zero is None:
        k = torch.zeros_like(rows)
        with torch.set_grad_enabled(first_hidden_grad and torch.is_grad_enabled()):
            hidden_zero = denoise(chains[:, 0], grid[k])[1]
    return ChainScores(
        torch.stack(logprob_terms, dim=1).mean(dim=1),
        torch.stack(entropy_terms, dim=1).mean(dim=1),
        hidden_zero if first_hidden else None,
    )


__all__ = [
    "NOISE_METHODS",
    "NOT_SCORED",
    "ChainSample",
    "ChainScores",
    "Denoiser",
    "LearnedStd",
    "NOISE_STD_RANGE",
    "RLSettings",
    "gaussian_entropy",
    "initial_logprob",
    "pack_chains",
    "sample_chain",
    "score_chain",
    "unpack_chains",
]
