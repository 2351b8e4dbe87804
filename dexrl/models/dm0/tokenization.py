"""DM0 prompt tokenization: the slow Qwen2 tokenizer and Dexbotic's ``step`` chat format.

For inference the token sequence is ``encode(SYSTEM + " ") + encode("USER: ") +
encode(prompt + " ")`` (each segment on its own, without special tokens; no assistant turn),
truncated and right-padded with the tokenizer's pad id to ``model_max_length``. The prompt is
stripped and its newlines become spaces; unlike π0, underscores are kept.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import torch

from dexrl.errors import DexrlError

SYSTEM_PROMPT = (
    "A chat between a curious user and an artificial intelligence assistant. "
    "The assistant gives helpful, detailed, and polite answers to the user's questions."
)
SEPARATOR = " "
USER_ROLE = "USER: "
TOKENIZER_FILES = ("vocab.json", "merges.txt")
_CLASSES = ("Qwen2Tokenizer", "Qwen2TokenizerFast")
# transformers stores ~1e30 when no length was set; a real DM0 prompt length is small.
_MAX_SANE_LENGTH = 1_000_000
_CACHE_SIZE = 4096
_HINT = "copy vocab.json, merges.txt and tokenizer_config.json from the DM0 checkpoint"


def clean_prompt_dm0(text: str) -> str:
    """Clean a task description as DM0 was trained: strip, newlines -> space (``_`` is kept)."""
    return text.strip().replace("\n", " ")


class Dm0PromptTokenizer:
    """Turn prompts into fixed-length (ids, mask) batches for the DM0 prefix.

    Args:
        tokenizer: A slow ``Qwen2Tokenizer`` with a pad token.
        model_max_length: Token count of every row (default: the tokenizer's).
    """

    def __init__(self, tokenizer, model_max_length: int | None = None) -> None:
        length = tokenizer.model_max_length if model_max_length is None else model_max_length
        where = str(Path(getattr(tokenizer, "name_or_path", "") or ".") / "tokenizer_config.json")
        if isinstance(length, bool) or not isinstance(length, int) or not 0 < length <= (
            _MAX_SANE_LENGTH
        ):
            raise DexrlError(
                f"model_max_length is {length!r}, expected a positive int",
                hint='set "model_max_length" in tokenizer_config.json (Dexbotic trains DM0 '
                "with 200)",
                where=where,
                code="tokenizer-max-length-invalid",
            )
        if tokenizer.pad_token_id is None:
            raise DexrlError("the tokenizer has no pad token", hint='set "pad_token": '
                             '"<|endoftext|>" in tokenizer_config.json', where=where,
                             code="tokenizer-special-tokens")
        self.tokenizer = tokenizer
        self.model_max_length = length
        self.pad_id: int = tokenizer.pad_token_id
        self._head = self._encode(SYSTEM_PROMPT + SEPARATOR) + self._encode(USER_ROLE)
        # LIBERO repeats a few dozen task strings; the slow tokenizer is worth caching.
        self._cache: dict[str, list[int]] = {}

    @classmethod
    def from_checkpoint(
        cls, directory: str | Path, model_max_length: int | None = None
    ) -> Dm0PromptTokenizer:
        """Load the slow Qwen2 tokenizer of a checkpoint directory (``vocab.json``,
        ``merges.txt``, ``tokenizer_config.json``), offline."""
        from transformers import Qwen2Tokenizer

        directory = Path(directory)
        for name in TOKENIZER_FILES:
            if not (directory / name).is_file():
                raise DexrlError(f"{name} not found (DM0 uses a Qwen2 BPE tokenizer)", _HINT,
                                 where=str(directory / name), code="tokenizer-missing")
        _check_tokenizer_class(directory / "tokenizer_config.json")
        try:
            tokenizer = Qwen2Tokenizer.from_pretrained(str(directory), local_files_only=True)
        except (OSError, ValueError, TypeError, KeyError) as err:
            raise DexrlError(f"cannot load the Qwen2 tokenizer: {err}", _HINT,
                             where=str(directory), code="tokenizer-unreadable") from err
        return cls(tokenizer, model_max_length)

    @property
    def vocab_size(self) -> int:
        """Number of token ids, added tokens included (ids are < this)."""
        return len(self.tokenizer)

    def __call__(self, prompts: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Tokenize ``prompts`` -> (ids long [B, L], mask bool [B, L]) with L = model_max_length.

        The mask marks the chat tokens (True) and the padding (False).
        """
        if isinstance(prompts, str):
            raise TypeError("expected a sequence of prompts, got a single str")
        length = self.model_max_length
        ids = torch.full((len(prompts), length), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), length), dtype=torch.bool)
        for row, prompt in enumerate(prompts):
            pieces = (self._head + self._prompt_ids(prompt))[:length]
            ids[row, : len(pieces)] = torch.tensor(pieces, dtype=torch.long)
            mask[row, : len(pieces)] = True
        return ids, mask

    def _prompt_ids(self, prompt: str) -> list[int]:
        if prompt not in self._cache:
            if len(self._cache) >= _CACHE_SIZE:
                self._cache.clear()
            text = clean_prompt_dm0(prompt)
            self._cache[prompt] = self._encode(text + SEPARATOR) if text else []
        return self._cache[prompt]

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))


def _check_tokenizer_class(path: Path) -> None:
    """A tokenizer_config.json naming another tokenizer class is the wrong checkpoint."""
    if not path.is_file():
        return
    try:
        config = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DexrlError(f"cannot read JSON: {err}", _HINT, where=str(path),
                         code="model-json-unreadable") from err
    name = config.get("tokenizer_class") if isinstance(config, dict) else None
    if name is not None and name not in _CLASSES:
        raise DexrlError(f"tokenizer_class is {name!r}; DM0 uses Qwen2Tokenizer", _HINT,
                         where=str(path), code="tokenizer-class-unsupported")


__all__ = ["SYSTEM_PROMPT", "Dm0PromptTokenizer", "clean_prompt_dm0"]
