"""The inference policy π0 and DM0 share: LIBERO env observations in, env actions out."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol, Self

import numpy as np
import torch

from dexrl.errors import DexrlError
from dexrl.models.choices import NORM_MODES
from dexrl.models.flow.config import FlowConfig
from dexrl.models.flow.loader import load_weights
from dexrl.models.flow.network import ModelInputs, MoTFlowNetwork
from dexrl.models.images import ImagePreprocessor
from dexrl.models.transforms import (
    NormMode,
    NormStats,
    actions_to_env,
    state_to_model,
)

ENV_ACTION_DIM = 7
OBS_KEYS = ("main_images", "wrist_images", "states", "task_descriptions")
NUM_VIEWS = 3  # [main, wrist, zero pad]: the layout π0 and DM0 were trained with on LIBERO


class PromptTokenizer(Protocol):
    """Turns prompts into fixed-length (ids long [B, L], mask bool [B, L])."""

    @property
    def vocab_size(self) -> int:
        """Token ids are below this."""
        ...

    def __call__(self, prompts: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]: ...


class FlowPolicy:
    """A loaded flow-matching VLA with its tokenizer, image preprocessing and norm statistics.

    Shared by π0 and DM0; subclasses declare their checkpoints as data (:attr:`config_class`,
    :attr:`network_class`, :attr:`extra_keys`, :attr:`float32_keys`), set
    :attr:`load_tokenizer` and implement :meth:`load_images`, which :meth:`from_checkpoint` uses.

    Args:
        network: The network (its device and dtype are used as they are).
        tokenizer: Prompt tokenizer: ``tokenizer(prompts) -> (ids, mask)``, with ``vocab_size``.
        images: Image preprocessor of the checkpoint.
        norm_stats: State/action statistics of the checkpoint.
        norm_mode: ``mean_std`` (Dexbotic's LIBERO checkpoints) or ``quantile``.
    """

    def __init__(
        self,
        network: MoTFlowNetwork,
        tokenizer: PromptTokenizer,
        images: ImagePreprocessor,
        norm_stats: NormStats,
        norm_mode: NormMode = "mean_std",
    ) -> None:
        vocab = network.config.llm.vocab_size
        if tokenizer.vocab_size > vocab:
            raise DexrlError(
                f"tokenizer has {tokenizer.vocab_size} tokens but the LLM embeds only {vocab}",
                hint="use the tokenizer files that belong to this checkpoint",
                where=network.config.source,
                code="tokenizer-vocab-mismatch",
            )
        if norm_mode not in NORM_MODES:
            raise DexrlError(
                f"unknown norm_mode {norm_mode!r}",
                hint=f"use one of {', '.join(NORM_MODES)}",
                where="norm_mode",
                code="norm-mode-unknown",
            )
        self.network = network
        self.tokenizer = tokenizer
        self.images = images
        self.norm_stats = norm_stats
        self.norm_mode = norm_mode

    # What a model's checkpoints hold, as data for the one flow loader (:meth:`load_network`):
    # its config.json parser, its network, the checkpoint keys the network leaves unused (glob
    # patterns) and those that stay float32 when the model runs in bf16 or fp16.
    config_class: ClassVar[type[FlowConfig]]
    network_class: ClassVar[Callable[[Any], MoTFlowNetwork]]
    extra_keys: ClassVar[tuple[str, ...]] = ()
    float32_keys: ClassVar[tuple[str, ...]] = ()
    # (ckpt_dir, model_max_length or None) -> prompt tokenizer.
    load_tokenizer: ClassVar[Callable[[Path, int | None], PromptTokenizer]]

    @classmethod
    def keeps_float32(cls, key: str) -> bool:
        """Whether checkpoint key ``key`` stays float32 when the model runs in bf16."""
        return any(fnmatch.fnmatchcase(key, pattern) for pattern in cls.float32_keys)

    @classmethod
    def load_network(
        cls,
        ckpt_dir: str | Path,
        *,
        device: str | torch.device = "cpu",
        dtype: torch.dtype | None = None,
        config: Any = None,
    ) -> MoTFlowNetwork:
        """Load this model's network of ``ckpt_dir`` in eval mode, key for key.

        Args:
            ckpt_dir: Dexbotic checkpoint directory (config.json + safetensors).
            device: Where the weights go (read there directly).
            dtype: Floating dtype of every weight (but :attr:`float32_keys` in bf16 or fp16);
                None keeps the checkpoint's (that of the first LLM layer when the file mixes
                dtypes).
            config: Already parsed ``config.json`` (read from ``ckpt_dir`` when None).

        Raises:
            DexrlError: missing/corrupt files, a config that disagrees with the weights, missing,
                unexpected or mis-shaped weights.
        """
        parsed = config or cls.config_class.from_dir(ckpt_dir)
        return load_weights(ckpt_dir, parsed, lambda: cls.network_class(parsed), cls.extra_keys,
                            device=device, dtype=dtype, keeps_float32=cls.keeps_float32)

    @classmethod
    def load_images(cls, ckpt_dir: Path, config: Any) -> ImagePreprocessor:
        """The image preprocessing of this model type for ``ckpt_dir``."""
        raise NotImplementedError

    @classmethod
    def from_checkpoint(
        cls,
        ckpt_dir: str | Path,
        *,
        device: str | torch.device = "cpu",
        dtype: torch.dtype | None = None,
        config: Any = None,
        norm_mode: NormMode = "mean_std",
        model_max_length: int | None = None,
    ) -> Self:
        """Load network, tokenizer, image preprocessing and norm stats from a checkpoint directory.

        Args:
            ckpt_dir: Dexbotic checkpoint directory.
            device: Where the weights go.
            dtype: Floating dtype of the weights; None keeps the checkpoint's.
            config: Already parsed ``config.json`` of this model type (read when None).
            norm_mode: State/action normalization.
            model_max_length: Prompt length in tokens; None keeps ``tokenizer_config.json``'s.
        """
        ckpt_dir = Path(ckpt_dir)
        network = cls.load_network(ckpt_dir, device=device, dtype=dtype, config=config)
        tokenizer = cls.load_tokenizer(ckpt_dir, model_max_length)
        images = cls.load_images(ckpt_dir, network.config)
        norm_stats = NormStats.from_file(ckpt_dir / "norm_stats.json")
        return cls(network, tokenizer, images, norm_stats, norm_mode)

    @property
    def device(self) -> torch.device:
        """Device of the network's weights."""
        return self.network.model.action_out_proj.weight.device

    def observation(self, env_obs: Mapping[str, Any]) -> ModelInputs:
        """Turn LIBERO env observations into model inputs on the network's device.

        Images become [B, 3, 3, S, S] (main, wrist, zeros) with masks [True, True, False].
        """
        batch = check_env_obs(env_obs)
        main = self.images(as_frames(env_obs["main_images"]))
        wrist = self.images(as_frames(env_obs["wrist_images"]))
        pad = torch.zeros_like(main)
        images = torch.stack([main, wrist, pad], dim=1)
        present = (True, True, False)
        image_masks = torch.tensor([present]).expand(batch, NUM_VIEWS)
        tokens, token_mask = self.tokenizer(list(env_obs["task_descriptions"]))
        state = state_to_model(env_obs["states"], self.norm_stats, self.norm_mode)
        return ModelInputs(images, image_masks, tokens, token_mask, state,
                           view_present=present).to(self.device)

    @torch.no_grad()
    def predict(
        self,
        env_obs: Mapping[str, Any],
        noise: torch.Tensor | None = None,
        num_steps: int = 10,
        num_action_chunks: int | None = None,
    ) -> dict[str, torch.Tensor]:
        """Sample one action chunk per observation with the deterministic Euler ODE.

        Args:
            env_obs: ``main_images``/``wrist_images`` uint8 [B, H, W, 3], ``states`` [B, 8],
                ``task_descriptions`` list of B strings.
            noise: Initial x at t = 1, [B, chunk_size, 32]; standard normal when None.
            num_steps: Euler steps.
            num_action_chunks: Leading actions to return (default: the whole chunk).

        Returns:
            ``actions``: float32 [B, num_action_chunks, 7] absolute env actions (CPU);
            ``raw_actions``: float32 [B, chunk_size, 32] normalized model output (CPU).
        """
        obs = self.observation(env_obs)
        config = self.network.config
        shape = (obs.state.shape[0], config.chunk_size, config.action_dim)
        if noise is None:
            noise = torch.randn(shape, device=self.device)
        elif tuple(noise.shape) != shape:
            raise DexrlError(
                f"noise has shape {list(noise.shape)}, expected {list(shape)}",
                hint="pass noise of shape [batch, chunk_size, action_dim]",
                code="policy-noise-shape",
            )
        if num_steps < 1:
            raise DexrlError(f"num_steps is {num_steps}", hint="use at least 1 denoising step",
                             code="policy-num-steps-invalid")
        chunks = num_action_chunks or config.chunk_size
        if not 0 < chunks <= config.chunk_size:
            raise DexrlError(
                f"num_action_chunks is {chunks}, the chunk has {config.chunk_size}",
                hint=f"use 1..{config.chunk_size} action chunks",
                code="policy-action-chunks-invalid",
            )
        raw = self.network.sample_actions(obs, noise.to(self.device), num_steps).cpu()
        states = torch.as_tensor(np.asarray(env_obs["states"]), dtype=torch.float32)
        actions = actions_to_env(
            raw, states, self.norm_stats, self.norm_mode, chunks, env_dim=ENV_ACTION_DIM
        )
        return {"actions": actions, "raw_actions": raw}


def as_frames(images: Any) -> torch.Tensor | np.ndarray:
    return images if isinstance(images, torch.Tensor) else np.asarray(images)


def check_env_obs(env_obs: Mapping[str, Any]) -> int:
    """Validate keys and batch sizes of ``env_obs``; returns the batch size."""
    missing = [k for k in OBS_KEYS if k not in env_obs]
    if missing:
        raise DexrlError(
            f"env observation lacks {', '.join(missing)}",
            hint=f"pass a dict with {', '.join(OBS_KEYS)}",
            where="env_obs",
            code="policy-obs-invalid",
        )
    if isinstance(env_obs["task_descriptions"], str):
        raise DexrlError(
            "task_descriptions is a single string",
            hint="pass one task description per batch row",
            where="env_obs",
            code="policy-obs-invalid",
        )
    sizes = {k: len(env_obs[k]) for k in OBS_KEYS}
    if len(set(sizes.values())) != 1:
        raise DexrlError(
            f"batch sizes differ: {sizes}",
            hint="give every key the same batch size",
            where="env_obs",
            code="policy-obs-invalid",
        )
    for key in ("main_images", "wrist_images"):
        frames = as_frames(env_obs[key])
        if frames.dtype not in (np.uint8, torch.uint8) or frames.ndim != 4 or frames.shape[-1] != 3:
            raise DexrlError(
                f"{key} must be uint8 [B, H, W, 3], got {frames.dtype} {list(frames.shape)}",
                hint="pass raw RGB camera frames",
                where="env_obs",
                code="policy-obs-invalid",
            )
    states = np.asarray(env_obs["states"])
    if states.ndim != 2 or not 0 < states.shape[1] <= 32:
        raise DexrlError(
            f"states must be [B, d<=32], got {list(states.shape)}",
            hint="pass the env's proprioceptive states",
            where="env_obs",
            code="policy-obs-invalid",
        )
    return sizes["states"]
