"""π0 prompt tokenization: Gemma SentencePiece ids for the raw task text, fixed length.

Dexbotic's π0 drives the slow Gemma tokenizer's SentencePiece model directly:
``encode(clean_prompt, add_bos=True) + encode("\\n")``, truncated and right-padded with id 0 to
``model_max_length``. We load the same ``tokenizer.model`` with sentencepiece, without transformers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import sentencepiece
import torch

from dexrl.errors import DexrlError

PAD_ID = 0


def clean_prompt_pi0(text: str) -> str:
    """Clean a task description as π0 was trained: strip, then newlines and ``_`` -> space."""
    return text.strip().replace("\n", " ").replace("_", " ")


class Pi0PromptTokenizer:
    """Turn prompts into fixed-length (ids, mask) batches for the π0 prefix.

    Args:
        sp_model_path: The checkpoint's ``tokenizer.model`` (SentencePiece, pad id 0).
        model_max_length: Token count of every row (48 for the LIBERO π0 checkpoints).
    """

    def __init__(self, sp_model_path: str | Path, model_max_length: int) -> None:
        path = Path(sp_model_path)
        hint = "copy tokenizer.model from the base π0 checkpoint (Gemma SentencePiece)"
        if not path.is_file():
            raise DexrlError("tokenizer.model not found", hint, where=str(path),
                             code="tokenizer-missing")
        self.sp = sentencepiece.SentencePieceProcessor()
        try:
            self.sp.Load(str(path))
        except (OSError, RuntimeError) as err:
            raise DexrlError(f"not a SentencePiece model: {err}", hint, where=str(path),
                             code="tokenizer-unreadable") from err
        if self.sp.pad_id() != PAD_ID or self.sp.bos_id() < 0:
            raise DexrlError(
                f"pad id {self.sp.pad_id()} / bos id {self.sp.bos_id()}; π0 needs pad 0 and a bos",
                hint, where=str(path),
                code="tokenizer-special-tokens",
            )
        if model_max_length < 1:
            raise ValueError(f"model_max_length must be >= 1, got {model_max_length}")
        self.model_max_length = model_max_length
        self._newline_ids: list[int] = self.sp.encode("\n")

    @classmethod
    def from_checkpoint(
        cls, directory: str | Path, model_max_length: int | None = None
    ) -> Pi0PromptTokenizer:
        """Load ``tokenizer.model`` and ``model_max_length`` (from ``tokenizer_config.json``,
        unless given) of a checkpoint directory."""
        directory = Path(directory)
        if model_max_length is None:
            model_max_length = _read_max_length(directory / "tokenizer_config.json")
        return cls(directory / "tokenizer.model", model_max_length)

    @property
    def vocab_size(self) -> int:
        """Number of SentencePiece pieces (ids are < this)."""
        return self.sp.get_piece_size()

    def __call__(self, prompts: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Tokenize ``prompts`` -> (ids long [B, L], mask bool [B, L]) with L = model_max_length."""
        if isinstance(prompts, str):
            raise TypeError("expected a sequence of prompts, got a single str")
        encoded = self.sp.encode([clean_prompt_pi0(p) for p in prompts], add_bos=True)
        length = self.model_max_length
        ids = torch.full((len(encoded), length), PAD_ID, dtype=torch.long)
        for row, pieces in enumerate(encoded):
            pieces = (pieces + self._newline_ids)[:length]
            ids[row, : len(pieces)] = torch.tensor(pieces, dtype=torch.long)
        return ids, ids != PAD_ID


def _read_max_length(path: Path) -> int:
    hint = 'add "model_max_length": 48 (the π0 LIBERO value) to tokenizer_config.json'
    if not path.is_file():
        raise DexrlError("tokenizer_config.json not found", hint, where=str(path),
                         code="tokenizer-missing")
    try:
        config = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DexrlError(f"cannot read JSON: {err}", hint, where=str(path),
                         code="model-json-unreadable") from err
    value = config.get("model_max_length") if isinstance(config, dict) else None
    # transformers stores ~1e30 when no length was set; a real π0 prompt length is small.
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= 1_000_000:
        raise DexrlError(f"model_max_length is {value!r}, expected a positive int", hint,
                         where=str(path), code="tokenizer-max-length-invalid")
    return value


__all__ = ["PAD_ID", "Pi0PromptTokenizer", "clean_prompt_pi0"]
