"""The π0 inference policy: the shared flow policy with π0's network, tokenizer and images."""

from __future__ import annotations

from pathlib import Path

from dexrl.models.flow.policy import FlowPolicy
from dexrl.models.images import ImagePreprocessor
from dexrl.models.pi0.config import ALLOWED_EXTRA_KEYS, Pi0Config
from dexrl.models.pi0.network import Pi0Network
from dexrl.models.pi0.tokenization import Pi0PromptTokenizer


class Pi0Policy(FlowPolicy):
    """A loaded π0 with its tokenizer, image preprocessing and normalization statistics.

    :meth:`~FlowPolicy.from_checkpoint` reads the preprocessor from ``ckpt_dir`` itself;
    config.json's ``processor_config`` names a path on the machine the checkpoint was trained on
    and is ignored.
    """

    network: Pi0Network
    config_class = Pi0Config
    network_class = Pi0Network
    extra_keys = ALLOWED_EXTRA_KEYS
    load_tokenizer = staticmethod(Pi0PromptTokenizer.from_checkpoint)

    @classmethod
    def load_images(cls, ckpt_dir: Path, config: Pi0Config) -> ImagePreprocessor:
        """The ``preprocessor_config.json`` of ``ckpt_dir``."""
        return ImagePreprocessor.from_checkpoint(ckpt_dir)
