"""Inference wrapper around :class:`Dm0Network`: LIBERO env observations in, env actions out."""

from __future__ import annotations

from pathlib import Path

from dexrl.models.dm0.config import ALLOWED_EXTRA_KEYS, FLOAT32_KEYS, Dm0Config
from dexrl.models.dm0.network import Dm0Network
from dexrl.models.dm0.tokenization import Dm0PromptTokenizer
from dexrl.models.flow.policy import FlowPolicy
from dexrl.models.images import ImagePreprocessor


class Dm0Policy(FlowPolicy):
    """A loaded DM0 with its tokenizer, image preprocessing and normalization statistics.

    Views, state handling and outputs are those of :class:`~dexrl.models.flow.policy.FlowPolicy`
    (main, wrist, zero pad; 32-d padded state used to make the delta actions absolute). The
    default ``norm_mode`` mean/std is that of RLinf's DM0 loader and Dexbotic's LIBERO experiment
    (Dexbotic's generic DM0 inference uses quantiles).
    """

    network: Dm0Network
    config_class = Dm0Config
    network_class = Dm0Network
    extra_keys = ALLOWED_EXTRA_KEYS
    float32_keys = FLOAT32_KEYS

    # A set model_max_length overrides tokenizer_config.json's: DM0 checkpoints may record a long
    # one (e.g. 2048) while Dexbotic trains with 200. Right padding never changes the outputs
    # (padded tokens are masked and do not advance positions); it only costs compute.
    load_tokenizer = staticmethod(Dm0PromptTokenizer.from_checkpoint)

    @classmethod
    def load_images(cls, ckpt_dir: Path, config: Dm0Config) -> ImagePreprocessor:
        """The PE tower's image preprocessing.

        As Dexbotic's PE tower defines it in code (pad to square, bicubic resize to the tower's
        image size, scale to [-1, 1]); a ``preprocessor_config.json`` in the directory is not
        consulted, as Dexbotic does not consult it for DM0 either.
        """
        size = config.vision.image_size
        return ImagePreprocessor(size=(size, size))
