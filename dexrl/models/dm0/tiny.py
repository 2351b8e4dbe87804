"""Tiny random DM0 checkpoints in the exact Dexbotic directory layout, for tests and ``--smoke``.

The directory holds ``config.json`` (``dexbotic_dm0``, Qwen3 sub-configs, ``pe_lang_l14_728`` +
``linear4x``, plus a small ``vision_config`` with the tower's sizes), ``model.safetensors`` (or
shards), the Qwen2 tokenizer files ``vocab.json`` + ``merges.txt`` + ``tokenizer_config.json``
(a byte-level BPE trained in-process with ``tokenizers``) and ``norm_stats.json``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from dexrl.models.dm0.config import PROJECTOR_TYPE, VISION_TOWER, Dm0Config
from dexrl.models.dm0.network import Dm0Network
from dexrl.models.dm0.tokenization import SYSTEM_PROMPT, USER_ROLE
from dexrl.models.dm0.vision import PeVisionConfig
from dexrl.models.pi0.tiny import (
    dexbotic_config,
    random_state,
    save_checkpoint,
    tiny_tower,
)
from dexrl.models.tiny_files import task_corpus, write_norm_stats

TINY_VISION = PeVisionConfig(image_size=56, patch_size=7, width=16, layers=2, heads=2)
TINY_PROMPT_LENGTH = 64
# Qwen's special tokens come after the BPE vocabulary, as added tokens.
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
PAD_TOKEN, EOS_TOKEN = "<|endoftext|>", "<|im_end|>"
# Real checkpoints record where the processor lived on the training machine; loaders ignore it.
FOREIGN_PROCESSOR_PATH = "/mnt/cluster/dexbotic/checkpoints/DM0-base"


def write_qwen_tokenizer(
    directory: str | Path, model_max_length: int = TINY_PROMPT_LENGTH, vocab_size: int = 1000
) -> int:
    """Train a tiny byte-level BPE and write it as Qwen2 tokenizer files.

    Writes ``vocab.json``, ``merges.txt``, ``tokenizer_config.json`` (``Qwen2Tokenizer``,
    ``model_max_length``, pad ``<|endoftext|>``, eos ``<|im_end|>``), ``added_tokens.json`` and
    ``special_tokens_map.json``. Returns the number of token ids (BPE vocabulary + specials).
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    bpe = Tokenizer(models.BPE())
    bpe.normalizer = normalizers.NFC()
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator([SYSTEM_PROMPT, USER_ROLE, *task_corpus()], trainer)
    bpe.model.save(str(directory))
    first = bpe.get_vocab_size()
    added = {token: first + i for i, token in enumerate(SPECIAL_TOKENS)}
    decoder = {
        str(index): {"content": token, "lstrip": False, "normalized": False, "rstrip": False,
                     "single_word": False, "special": True}
        for token, index in added.items()
    }
    _write_json(directory / "added_tokens.json", added)
    _write_json(directory / "special_tokens_map.json",
                {"eos_token": EOS_TOKEN, "pad_token": PAD_TOKEN})
    _write_json(directory / "tokenizer_config.json", {
        "tokenizer_class": "Qwen2Tokenizer",
        "model_max_length": model_max_length,
        "padding_side": "right",
        "bos_token": None,
        "eos_token": EOS_TOKEN,
        "pad_token": PAD_TOKEN,
        "unk_token": None,
        "errors": "replace",
        "split_special_tokens": False,
        "add_prefix_space": False,
        "added_tokens_decoder": decoder,
    })
    return first + len(SPECIAL_TOKENS)


def _qwen3(vocab_size: int, hidden: int, mlp: int) -> dict[str, Any]:
    config = tiny_tower("qwen3", vocab_size, hidden, mlp, rope_theta=1e6, tie_word_embeddings=False)
    config.pop("dtype", None)  # transformers < 4.56 (which Dexbotic used) writes torch_dtype
    return config


def tiny_dm0_config(
    vocab_size: int, *, chunk_size: int = 8, dtype_name: str, vision: PeVisionConfig = TINY_VISION
) -> dict[str, Any]:
    """The ``config.json`` content of a tiny DM0 (Qwen3 towers of the π0 tiny sizes)."""
    llm = _qwen3(vocab_size, hidden=32, mlp=64)
    expert = _qwen3(vocab_size, hidden=16, mlp=32)
    for sub in (llm, expert):
        sub["torch_dtype"] = dtype_name
    return dexbotic_config("dexbotic_dm0", "DM0ForCausalLM", llm, expert, {
        "processor_config": FOREIGN_PROCESSOR_PATH,
        "mm_vision_tower": VISION_TOWER,
        "mm_projector_type": PROJECTOR_TYPE,
        "mm_hidden_size": vision.width,
        "vision_config": dataclasses.asdict(vision),
        "action_dim": 32,
        "chunk_size": chunk_size,
        "bf16": dtype_name == "bfloat16",
        "chat_template": "step",
        "init_llm_weights": False,
        "torch_dtype": dtype_name,
        "use_cache": False,
    })


def write_tiny_dm0(
    path: str | Path,
    *,
    seed: int = 0,
    shards: int = 1,
    dtype: torch.dtype = torch.float32,
    wrapped_norm_stats: bool = True,
    chunk_size: int = 8,
    extra_keys: bool = True,
) -> Path:
    """Write a tiny random Dexbotic DM0 checkpoint directory and return its path.

    The arguments are those of :func:`~dexrl.models.pi0.tiny.write_tiny_pi0` (DM0 has a
    fixed projector), except that ``extra_keys`` (default on) saves the unused LM heads Dexbotic's
    DM0 checkpoints hold (top-level ``lm_head`` and ``model.action_expert.lm_head``).
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    num_tokens = write_qwen_tokenizer(path)
    # Dexbotic's embedding table is larger than the tokenizer (it is resized to config.vocab_size).
    vocab = num_tokens + 5
    write_norm_stats(path, seed, wrapped=wrapped_norm_stats)
    dtype_name = str(dtype).removeprefix("torch.")
    raw = tiny_dm0_config(vocab, chunk_size=chunk_size, dtype_name=dtype_name)
    config = Dm0Config.from_dict(raw)
    torch.manual_seed(seed)
    state = random_state(Dm0Network(config), seed)
    if extra_keys:
        generator = torch.Generator().manual_seed(seed + 1)
        state["lm_head.weight"] = torch.randn(vocab, config.llm.hidden_size, generator=generator)
        state["model.action_expert.lm_head.weight"] = torch.randn(
            vocab, config.expert.hidden_size, generator=generator
        )
    return save_checkpoint(path, raw, state, dtype=dtype, shards=shards)


def _write_json(path: Path, content: Any) -> None:
    path.write_text(json.dumps(content, indent=2) + "\n")


__all__ = ["TINY_VISION", "tiny_dm0_config", "write_qwen_tokenizer", "write_tiny_dm0"]
