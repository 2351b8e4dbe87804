"""Inference wrapper around :class:`Dm0Network`: LIBERO env observations in, env actions out."""

from __future__ import annotations

from pathlib import Path

import torch

from dexrl.models.dm0.config import Dm0Config
from dexrl.models.dm0.loader import load_dm0_network
from dexrl.models.dm0.network import Dm0Network
from dexrl.models.dm0.tokenization import Dm0PromptTokenizer
from dexrl.models.images import ImagePreprocessor
from dexrl.models.pi0.policy import FlowPolicy
from dexrl.models.transforms import NormMode, NormStats

# RLinf's DM0 loader and Dexbotic's LIBERO experiment normalize with mean/std; Dexbotic's generic
# DM0 inference uses quantiles.
DEFAULT_NORM_MODE: NormMode = "mean_std"


class Dm0Policy(FlowPolicy):
    """A loaded DM0 with its tokenizer, image preprocessing and normalization statistics.

    Views, state handling and outputs are those of :class:`~dexrl.models.pi0.policy.FlowPolicy`
    (main, wrist, zero pad; 32-d padded state used to make the delta actions absolute).
    """

    network: Dm0Network

    @classmethod
    def from_checkpoint(
        cls,
        ckpt_dir: str | Path,
        *,
        device: str | torch.device = "cpu",
        dtype: torch.dtype | None = None,
        config: Dm0Config | None = None,
        norm_mode: NormMode = DEFAULT_NORM_MODE,
        model_max_length: int | None = None,
    ) -> Dm0Policy:
        """Load network, tokenizer and norm stats from the checkpoint directory.

        ``model_max_length`` overrides the prompt length of ``tokenizer_config.json``: DM0
        checkpoints may record a long one (e.g. 2048) while Dexbotic trains with 200. Right
        padding never changes the outputs (padded tokens are masked and do not advance
        positions); it only costs compute.

        Images are preprocessed as Dexbotic's PE tower defines in code (pad to square, bicubic
        resize to the tower's image size, scale to [-1, 1]); a ``preprocessor_config.json`` in
        the directory is not consulted, as Dexbotic does not consult it for DM0 either.
        """
        ckpt_dir = Path(ckpt_dir)
        config = config or Dm0Config.from_dir(ckpt_dir)
        size = config.vision.image_size
        return cls(
            load_dm0_network(ckpt_dir, device=device, dtype=dtype, config=config),
            Dm0PromptTokenizer.from_checkpoint(ckpt_dir, model_max_length),
            ImagePreprocessor(size=(size, size)),
            NormStats.from_file(ckpt_dir / "norm_stats.json"),
            norm_mode,
        )
