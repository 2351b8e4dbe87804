"""RLinf policy adapter shared by dexrl's flow-matching VLAs (π0, DM0).

Design notes: docs/design/policy-adapters.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import torch
from rlinf.models.embodiment.base_policy import BasePolicy
from rlinf.models.embodiment.modules.explore_noise_net import ExploreNoiseNet
from torch import nn

from dexrl.bridge.policies.chain import (
    Denoiser,
    RLSettings,
    pack_chains,
    sample_chain,
    score_chain,
    unpack_chains,
)
from dexrl.bridge.policies.fast_rollout import FastRollout, template_obs
from dexrl.bridge.policies.prefix_cache import PrefixCacheSettings, PrefixStore, new_sample_ids
from dexrl.bridge.policies.rollout_core import INPUTS
from dexrl.checkpoints.verify import checkpoint_model_type
from dexrl.errors import DexrlError
from dexrl.models.choices import ATTENTION
from dexrl.models.flow.mot import PrefixCache
from dexrl.models.flow.network import ModelInputs

# The env-observation checks and frame conversion of the inference policy, so that both entry
# points accept exactly the same inputs.
from dexrl.models.flow.policy import FlowPolicy, as_frames, check_env_obs
from dexrl.models.transforms import NormMode, actions_to_env, state_to_model

EVAL_NOISE_SEED = 0
VALUE_HEAD_SEED = 0
VALUE_HEAD_INIT_STD = 0.02
NOISE_HEAD_SEED = 0
NOISE_HEAD_HIDDEN = [128, 64]  # RLinf's openpi ExploreNoiseNet (πRL's Flow-Noise head)
VIEW_KEYS = ("main_images", "wrist_images")


class FlowRLPolicy(nn.Module, BasePolicy):
    """A flow-matching VLA with a value head, serving RLinf's rollout and PPO training calls.

    Subclasses set :attr:`model_type`, ``_no_split_modules`` (RLinf's FSDP units: modules whose
    own forward runs, or their shards would never be gathered) and :attr:`policy_class`, the
    inference policy :meth:`load_flow_policy` loads.

    Args:
        policy: A loaded flow policy (network, tokenizer, image preprocessing, norm stats).
        settings: RL settings (see :class:`RLSettings`); ``norm_mode`` must be the policy's.
        prefix_cache: Budgets of the training prefix cache (used with ``train_expert_only``);
            None: the defaults of :class:`PrefixCacheSettings`.

    Raises:
        DexrlError: an RL setting that does not fit the model, or a norm mode mismatch.
    """

    model_type: ClassVar[str]
    _no_split_modules: ClassVar[list[str]]
    policy_class: ClassVar[type[FlowPolicy]]

    def __init__(self, policy: FlowPolicy, settings: RLSettings,
                 prefix_cache: PrefixCacheSettings | None = None) -> None:
        super().__init__()
        config = policy.network.config
        settings.check(config.chunk_size, config.action_dim)
        if policy.norm_mode != settings.norm_mode:
            raise DexrlError(
                f"the policy normalizes with {policy.norm_mode!r} but the RL settings say "
                f"{settings.norm_mode!r}",
                hint="load the policy with the norm_mode of actor.model.dexbotic.norm_mode",
                where="actor.model.dexbotic.norm_mode",
                code="policy-norm-mode-mismatch",
            )
        self.settings = settings
        self.flow = policy  # a plain object: its network's modules are registered once, as `model`
        self.model = policy.network.model
        if settings.add_value_head:
            anchor = self.model.action_out_proj.weight
            self.value_head = nn.Linear(config.expert.hidden_size, 1, device=anchor.device,
                                        dtype=anchor.dtype)
            init_value_head(self.value_head)
        if settings.noise_method == "flow_noise":
            anchor = self.model.action_out_proj.weight
            self.noise_head = build_noise_head(config.expert.hidden_size, config.action_dim,
                                               settings.noise_std_range, anchor)
        if settings.train_expert_only:
            for frozen in self.frozen_modules():
                frozen.requires_grad_(False)
        # The compiled and/or graphed rollout, once RLinf called a hook (None: eager).
        self._fast: FastRollout | None = None
        cache_settings = prefix_cache or PrefixCacheSettings()
        self.prefix_store = (PrefixStore(cache_settings)
                             if settings.train_expert_only and cache_settings.enabled else None)
        # New weights (a checkpoint, a resume) make every stored prefix stale.
        self.register_load_state_dict_pre_hook(_release_prefix_cache)

    @classmethod
    def load_flow_policy(
        cls,
        model_path: str,
        dtype: torch.dtype | None,
        norm_mode: NormMode,
        model_max_length: int | None,
    ) -> FlowPolicy:
        """Load this model type's policy (:attr:`policy_class`) on the CPU.

        Args:
            model_path: Checkpoint directory (its ``config.json`` names :attr:`model_type`).
            dtype: Weight dtype; None keeps the checkpoint's.
            norm_mode: State/action normalization.
            model_max_length: Prompt length in tokens; None keeps the checkpoint's.
        """
        return cls.policy_class.from_checkpoint(
            model_path, dtype=dtype, norm_mode=norm_mode, model_max_length=model_max_length
        )

    @classmethod
    def from_model_cfg(
        cls, cfg: Mapping[str, Any], torch_dtype: torch.dtype | None = None
    ) -> FlowRLPolicy:
        """Build from RLinf's ``actor.model`` config (what ``rlinf.models.get_model`` passes:
        ``torch_dtype`` comes from ``precision``; None keeps the checkpoint's dtype). Loads on the
        CPU; RLinf moves the model.

        Raises:
            DexrlError: ``model_path`` unset or not a checkpoint of :attr:`model_type`, or an
                invalid setting.
        """
        settings = RLSettings.from_model_cfg(cfg)
        model_max_length = prompt_length(cfg)
        model_path = cfg.get("model_path")
        if not model_path:
            raise DexrlError("model_path is not set", hint=f"set actor.model.model_path to a "
                             f"Dexbotic {cls.model_type} checkpoint directory",
                             where="actor.model.model_path", code="policy-model-path-unset")
        found = checkpoint_model_type(str(model_path))
        if found != cls.model_type:
            raise DexrlError(f"the checkpoint is {found!r}, not {cls.model_type!r}",
                             hint=f"set actor.model.model_type={found} for this checkpoint",
                             where=str(Path(str(model_path)) / "config.json"),
                             code="model-type-mismatch")
        prefix_cache = PrefixCacheSettings.from_model_cfg(cfg)
        attention = attention_impl(cfg)
        policy = cls.load_flow_policy(str(model_path), torch_dtype, settings.norm_mode,
                                      model_max_length)
        policy.network.attention = attention
        return cls(policy, settings, prefix_cache)

    def frozen_modules(self) -> tuple[nn.Module, ...]:
        """What ``train_expert_only`` freezes: vision tower, projector and prefix LLM."""
        return self.model.mm_vision_tower, self.model.mm_projector, self.model.llm

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """RLinf's dispatch (``forward_type``, default: :meth:`default_forward`).

        nn.Module must come first among the bases (FSDP2 swaps the instance's class, which fails
        for an ABC-first layout), so BasePolicy's ``forward`` is reached explicitly.
        """
        return BasePolicy.forward(self, *args, **kwargs)

    def set_global_step(self, global_step: int) -> None:
        """RLinf's start-of-step hook (its runner calls it on the actor's model): prefix caches of
        an earlier step are dropped."""
        if self.prefix_store is not None:
            self.prefix_store.begin_step(global_step)

    def release_prefix_cache(self) -> None:
        """Drop every stored prefix cache (end of a training round; new weights)."""
        if self.prefix_store is not None:
            self.prefix_store.clear()

    @property
    def has_noise_head(self) -> bool:
        """Whether the policy has flow_noise's learned noise head."""
        return "noise_head" in self._modules

    def _learned_std(self, hidden: torch.Tensor) -> torch.Tensor:
        """flow_noise's per-element std float32 [B, T, D] from action-token hidden states."""
        head = self.noise_head
        return head(hidden.to(head.mlp_logvar.moduleList[0][0].weight.dtype)).float()

    @property
    def learned_std(self) -> Any:
        """:meth:`_learned_std` when the policy has a noise head, else None."""
        return self._learned_std if self.has_noise_head else None

    @property
    def has_value_head(self) -> bool:
        """Whether the policy has a critic (RLinf checks ``hasattr(model, "value_head")``)."""
        return "value_head" in self._modules

    @torch.no_grad()
    def predict_action_batch(
        self,
        env_obs: Mapping[str, Any],
        mode: str | None = None,
        compute_values: bool = True,
        noise: torch.Tensor | None = None,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """Sample one action chunk per observation (RLinf's rollout call).

        Args:
            env_obs: LIBERO observations: ``main_images``/``wrist_images`` uint8 [B, H, W, 3],
                ``states`` [B, 8], ``task_descriptions`` (B strings).
            mode: "train" (one scored stochastic step) or "eval" (ODE); None decides by
                ``do_sample`` in ``kwargs`` (False -> eval), else "train".
            compute_values: Report the critic's value (zeros without a value head).
            noise: Initial x at t = 1, [B, chunk, 32]; drawn when None.
            **kwargs: RLinf's sampling params; only ``do_sample`` is read.

        Returns:
            Actions float32 [B, num_action_chunks, action_dim] (CPU) and a dict with
            ``prev_logprobs`` float32 [B, num_action_chunks, action_dim] (zeros for eval),
            ``prev_values`` float32 [B, 1] and ``forward_inputs``.
        """
        deterministic = _is_deterministic(mode, kwargs.get("do_sample"))
        settings = self.settings
        inputs = self._rollout_inputs(env_obs)
        batch = inputs["state"].shape[0]
        scored = None if deterministic else settings.draw_scored_steps(batch)
        initial = self._initial_noise(batch, deterministic, noise)
        valued = compute_values and self.has_value_head
        if self._fast is None:
            sample = sample_chain(self._denoiser(self._observation(inputs), grad=False),
                                  initial, settings, scored, self.learned_std)
            chains, logprobs = sample.chains, sample.logprobs
            values = self._value(sample.first_hidden) if valued else None
        else:
            out = self._fast.run(inputs, initial, [] if scored is None else scored[0].tolist())
            chains, logprobs, values = out["chains"], out["logprobs"], out["values"]
        actions = actions_to_env(
            chains[:, -1].cpu(), env_obs["states"], self.flow.norm_stats,
            settings.norm_mode, settings.num_action_chunks, env_dim=settings.env_action_dim,
        )
        values = values[:, None] if valued else torch.zeros(batch, 1, device=chains.device)
        forward_inputs = {
            **inputs,
            "sample_ids": new_sample_ids(batch),
            "chains_bits": pack_chains(chains),
            "denoise_inds": settings.unscored(batch) if scored is None else scored,
        }
        return actions, {
            "prev_logprobs": self._slice(logprobs),
            "prev_values": values,
            "forward_inputs": forward_inputs,
        }

    def default_forward(
        self,
        forward_inputs: Mapping[str, torch.Tensor],
        compute_logprobs: bool = True,
        compute_entropy: bool = False,
        compute_values: bool = True,
        **kwargs: Any,
    ) -> dict[str, torch.Tensor | None]:
        """Re-score stored rollouts with gradients (RLinf's training call, via ``forward``).

        Returns:
            ``logprobs`` float32 [B, num_action_chunks, action_dim], ``values`` float32 [B],
            ``entropy`` float32 [B, 1] (the mean Gaussian entropy of the scored terms); an entry
            is None when not requested.

        Raises:
            DexrlError: values requested without a value head, or rows of deterministic calls.
        """
        del kwargs  # RLinf also passes use_cache
        if compute_values and not self.has_value_head:
            raise DexrlError(
                "values requested but the policy has no value head",
                hint="set actor.model.add_value_head: true (GAE needs a critic)",
                where="actor.model.add_value_head",
                code="policy-no-value-head",
            )
        settings = self.settings
        state = self._state(forward_inputs)
        ids = forward_inputs.get("sample_ids")
        # Tensors made under inference mode cannot enter a later graph: such calls do not store.
        if self.prefix_store is not None and ids is not None \
                and not torch.is_inference_mode_enabled():
            cache = self.prefix_store.prefix(ids.tolist(), lambda rows: self._encode_prefix(
                {k: forward_inputs[k][rows] for k in INPUTS}), state.device)
            denoise = self._cached_denoiser(cache, state)
        else:
            denoise = self._denoiser(self._observation(forward_inputs),
                                     grad=not settings.train_expert_only)
        scores = score_chain(
            denoise,
            unpack_chains(forward_inputs["chains_bits"]).to(state.device),
            forward_inputs["denoise_inds"].long(),
            settings,
            first_hidden=compute_values,
            first_hidden_grad=not settings.detach_critic_input,
            learned_std=self.learned_std,
        )
        entropy = self._slice(scores.entropy).mean(dim=(1, 2))[:, None]
        return {
            "logprobs": self._slice(scores.logprobs) if compute_logprobs else None,
            "values": self._value(scores.first_hidden) if compute_values else None,
            "entropy": entropy if compute_entropy else None,
        }

    def gradient_checkpointing_enable(self, **kwargs: Any) -> None:
        """Not supported; RLinf calls this only when ``fsdp_config.gradient_checkpointing``."""
        raise DexrlError(
            f"gradient checkpointing is not implemented for {self.model_type}",
            hint="set actor.fsdp_config.gradient_checkpointing: false (with train_expert_only "
            "the prefix keeps no activations)",
            where="actor.fsdp_config.gradient_checkpointing",
            code="policy-gradient-checkpointing-unsupported",
        )

    def enable_torch_compile(self, mode: str = "max-autotune-no-cudagraphs") -> None:
        """RLinf's rollout hook (``rollout.enable_torch_compile``): the rollout call's compute
        runs as three compiled graphs (prefix pass, denoising step, log-probs and value), one
        compilation each per batch size (docs/design/rollout-speed.md).

        Raises:
            DexrlError: a mode torch does not know.
        """
        self._fast_rollout().enable_compile(mode)

    def capture_cuda_graph(self, train_batch_size: int, eval_batch_size: int) -> None:
        """RLinf's rollout hook (``rollout.enable_cuda_graph``): capture the rollout call at
        both batch sizes (other sizes are captured at their first call, up to a few).

        Raises:
            DexrlError: the model is not on a CUDA GPU.
        """
        self._fast_rollout().capture([train_batch_size, eval_batch_size])

    def release_cuda_graph(self) -> None:
        """Destroy the captured graphs (RLinf calls it before offloading the model)."""
        if self._fast is not None:
            self._fast.release()

    def is_cuda_graph_enabled(self) -> bool:
        """Whether rollout calls replay CUDA graphs."""
        return self._fast is not None and self._fast.graphs is not None

    def input_template(self, batch: int) -> dict[str, torch.Tensor]:
        """Host inputs of a blank batch (the shapes and dtypes a graph captures)."""
        size = self.flow.images.size
        state_dim = self.flow.norm_stats.state.mean.shape[-1]
        return self._rollout_inputs(template_obs(batch, size, state_dim))

    def graph_weights(self) -> list[torch.Tensor]:
        """The tensors a captured rollout reads in place: parameters and buffers."""
        return [*self.parameters(), *self.buffers()]

    def _fast_rollout(self) -> FastRollout:
        if self._fast is None:
            self._fast = FastRollout(self)
        return self._fast

    def _rollout_inputs(self, env_obs: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        """The model's inputs as compact host tensors (what ``forward_inputs`` keeps)."""
        check_env_obs(env_obs)
        # Resize only (uint8 stays exact); the model's device normalizes (_model_inputs).
        views = [self.flow.images.resize(as_frames(env_obs[key])) for key in VIEW_KEYS]
        images = torch.stack(views, dim=1)
        tokens, token_mask = self.flow.tokenizer(list(env_obs["task_descriptions"]))
        state = state_to_model(env_obs["states"], self.flow.norm_stats, self.settings.norm_mode)
        return {"images": images.contiguous(), "tokens": tokens, "token_mask": token_mask,
                "state": state}

    def _observation(self, inputs: Mapping[str, torch.Tensor]) -> ModelInputs:
        """Network inputs from :meth:`_rollout_inputs` tensors (used by rollout and training)."""
        device = self.flow.device
        images, tokens, token_mask = (inputs[k].to(device) for k in INPUTS[:3])
        return self._model_inputs(images, tokens, token_mask, self._state(inputs))

    def _model_inputs(self, images: torch.Tensor, tokens: torch.Tensor,
                      token_mask: torch.Tensor, state: torch.Tensor) -> ModelInputs:
        """Network inputs from device tensors: uint8 views [B, V, S, S, 3] are normalized where
        they are. Every view holds an image (the masked pad view of the inference policy would
        be skipped anyway), which the host knows: nothing is read back from the device."""
        batch, views = images.shape[:2]
        frames = images.flatten(0, 1).permute(0, 3, 1, 2)
        pixels = self.flow.images.normalize(frames).contiguous().unflatten(0, (batch, views))
        masks = torch.ones(batch, views, dtype=torch.bool, device=images.device)
        return ModelInputs(pixels, masks, tokens.long(), token_mask.bool(), state,
                           view_present=(True,) * views)

    def _state(self, inputs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """The suffix's state input, as :meth:`_observation` builds it."""
        return inputs["state"].to(device=self.flow.device, dtype=torch.float32)

    def _encode_prefix(self, inputs: Mapping[str, torch.Tensor]) -> PrefixCache:
        """The frozen prefix of some rows, without a graph (``train_expert_only``)."""
        with torch.no_grad():
            return self.flow.network.encode_prefix(self._observation(inputs))

    def _denoiser(self, obs: ModelInputs, *, grad: bool) -> Denoiser:
        """Encode the prefix once (with a graph only if ``grad``); returns the per-step call."""
        with torch.set_grad_enabled(grad and torch.is_grad_enabled()):
            cache = self.flow.network.encode_prefix(obs)
        return self._cached_denoiser(cache, obs.state)

    def _cached_denoiser(self, cache: PrefixCache, state: torch.Tensor) -> Denoiser:
        network = self.flow.network
        return lambda x_t, t: network.denoise_step(cache, state, x_t, t)

    def _initial_noise(
        self, batch: int, deterministic: bool, noise: torch.Tensor | None
    ) -> torch.Tensor:
        config = self.flow.network.config
        shape = (batch, config.chunk_size, config.action_dim)
        device = self.flow.device
        if noise is not None:
            if tuple(noise.shape) != shape:
                raise DexrlError(f"noise has shape {list(noise.shape)}, expected {list(shape)}",
                                 hint="pass noise of shape [batch, chunk_size, action_dim]",
                                 code="policy-noise-shape")
            return noise.to(device=device, dtype=torch.float32)
        if deterministic:
            generator = torch.Generator().manual_seed(EVAL_NOISE_SEED)
            return torch.randn((1, *shape[1:]), generator=generator).expand(shape).to(device)
        return torch.randn(shape, device=device)

    def _value(self, hidden: torch.Tensor) -> torch.Tensor:
        """Value float32 [B] from the mean over the action tokens' final-normed states."""
        features = hidden.mean(dim=1)
        if self.settings.detach_critic_input:
            features = features.detach()
        return self.value_head(features.to(self.value_head.weight.dtype))[:, 0].float()

    def _slice(self, per_element: torch.Tensor) -> torch.Tensor:
        """[B, chunk, 32] -> the executed part [B, num_action_chunks, action_dim]."""
        return per_element[:, : self.settings.num_action_chunks, : self.settings.env_action_dim]


def init_value_head(head: nn.Linear) -> None:
    """Weights ~ N(0, 0.02²) from a fixed seed, bias 0 (the last layer of RLinf's ``ValueHead``).

    Identical in every process that builds the policy and a near-neutral start (values ≈ 0), but
    not zero: the value loss's gradient at the critic's input is the head's weight, so a zero
    weight would keep the first updates' value gradients out of the action expert even with
    ``detach_critic_input: false``.
    """
    generator = torch.Generator().manual_seed(VALUE_HEAD_SEED)
    weight = torch.randn(head.weight.shape, generator=generator) * VALUE_HEAD_INIT_STD
    with torch.no_grad():
        head.weight.copy_(weight)
        head.bias.zero_()


def build_noise_head(width: int, action_dim: int, std_range: tuple[float, float],
                     anchor: torch.Tensor) -> ExploreNoiseNet:
    """flow_noise's noise head: RLinf's ``ExploreNoiseNet`` as its openpi adapter builds it
    (action-token hidden states → MLP 128, 64 with tanh → tanh-squashed log-variance in
    ``std_range``), on ``anchor``'s device and dtype, its log-variance bounds kept float32.

    Initialized as PyTorch initializes ``nn.Linear`` (RLinf's), from a fixed seed: every process
    that builds the policy gets the same head, whatever its global RNG state.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(NOISE_HEAD_SEED)
        head = ExploreNoiseNet(in_dim=width, out_dim=action_dim, hidden_dims=NOISE_HEAD_HIDDEN,
                               activation_type="tanh", noise_logvar_range=list(std_range),
                               noise_scheduler_type="learn")
    head.mlp_logvar.to(device=anchor.device, dtype=anchor.dtype)
    return head.to(device=anchor.device)


def _release_prefix_cache(module: FlowRLPolicy, *_: Any) -> None:
    """Load-state-dict pre-hook: new weights make every stored prefix stale."""
    module.release_prefix_cache()


def prompt_length(cfg: Mapping[str, Any]) -> int | None:
    """``actor.model.dexbotic.model_max_length``: a positive int, or None for the checkpoint's.

    Raises:
        DexrlError: any other value.
    """
    length = (cfg.get("dexbotic", None) or {}).get("model_max_length")
    if length is not None and (isinstance(length, bool) or not isinstance(length, int)
                               or length < 1):
        raise DexrlError(f"model_max_length is {length!r}, expected a positive integer or null",
                         hint="set it to the prompt length the model was trained with (DM0: "
                         "200), or null to keep the checkpoint's tokenizer_config.json value",
                         where="actor.model.dexbotic.model_max_length",
                         code="policy-max-length-invalid")
    return length


def attention_impl(cfg: Mapping[str, Any]) -> str:
    """``actor.model.dexbotic.attention``: ``eager`` (default) or ``sdpa`` (a GPU lever, off by
    default until measured on a GPU; docs/performance.md).

    Raises:
        DexrlError: any other value.
    """
    value = (cfg.get("dexbotic", None) or {}).get("attention", "eager")
    if value not in ATTENTION:
        raise DexrlError(f"attention is {value!r}, expected one of {', '.join(ATTENTION)}",
                         hint="eager is the reference; sdpa uses torch's fused attention",
                         where="actor.model.dexbotic.attention", code="policy-attention-unknown")
    return value


def _is_deterministic(mode: str | None, do_sample: Any) -> bool:
    if mode is None:
        return do_sample is False
    if mode not in ("train", "eval"):
        raise DexrlError(f"unknown mode {mode!r}", hint="use 'train' or 'eval'",
                         where="predict_action_batch", code="policy-mode-unknown")
    return mode == "eval"


__all__ = ["EVAL_NOISE_SEED", "FlowRLPolicy", "attention_impl", "build_noise_head",
           "init_value_head", "prompt_length"]
