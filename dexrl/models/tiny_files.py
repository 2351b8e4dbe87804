"""Writers for the non-weight files of a Dexbotic checkpoint directory, tiny and deterministic.

Used by tests and by ``--smoke`` to build checkpoints in the real layout without downloads:
a SentencePiece ``tokenizer.model`` with Gemma's special-id layout, ``preprocessor_config.json`` in
the SiglipImageProcessor schema, and ``norm_stats.json`` with 32-d state/action statistics.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import sentencepiece

_SPECIAL = {"pad": "<pad>", "eos": "<eos>", "bos": "<bos>", "unk": "<unk>"}

# A small fixed corpus in the style of LIBERO task descriptions; it only has to give the BPE
# trainer enough text for a few hundred pieces.
_OBJECTS = ("black bowl", "plate", "ketchup", "cream cheese", "wine bottle", "alphabet soup",
            "butter", "milk", "orange juice", "tomato sauce", "basket", "stove", "drawer")
_PLACES = ("on the plate", "in the basket", "on top of the cabinet", "next to the cookie box",
           "on the wooden tray", "in the top drawer of the cabinet", "on the stove")
_VERBS = ("pick up the", "put the", "place the", "open the", "turn on the", "push the")


def task_corpus() -> list[str]:
    """LIBERO-style task sentences for training tiny tokenizers."""
    return [f"{verb} {obj} {place}" for verb in _VERBS for obj in _OBJECTS for place in _PLACES]


def _write_json(path: Path, content: Any) -> Path:
    path.write_text(json.dumps(content, indent=2) + "\n")
    return path


def write_sentencepiece_tokenizer(
    directory: str | Path, model_max_length: int = 16, vocab_size: int = 300
) -> Path:
    """Train a tiny BPE SentencePiece model and write the Gemma-style tokenizer files.

    Ids follow Gemma: pad 0, eos 1, bos 2, unk 3, then a ``"\\n"`` piece; identity normalization,
    byte fallback and no dummy prefix. Writes ``tokenizer.model``, ``tokenizer_config.json``
    (``GemmaTokenizer``, ``model_max_length``) and ``special_tokens_map.json``.

    Returns:
        The path of ``tokenizer.model``.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(task_corpus()),
        model_writer=model,
        model_type="bpe",
        vocab_size=vocab_size,
        hard_vocab_limit=False,
        pad_id=0, eos_id=1, bos_id=2, unk_id=3,
        pad_piece=_SPECIAL["pad"], eos_piece=_SPECIAL["eos"],
        bos_piece=_SPECIAL["bos"], unk_piece=_SPECIAL["unk"],
        user_defined_symbols=["\n"],
        normalization_rule_name="identity",
        add_dummy_prefix=False,
        byte_fallback=True,
        num_threads=1,
        minloglevel=2,
    )
    path = directory / "tokenizer.model"
    path.write_bytes(model.getvalue())
    tokens = {f"{name}_token": piece for name, piece in _SPECIAL.items()}
    _write_json(directory / "special_tokens_map.json", tokens)
    _write_json(directory / "tokenizer_config.json", {
        "tokenizer_class": "GemmaTokenizer",
        "model_max_length": model_max_length,
        "padding_side": "right",
        "add_bos_token": True,
        "add_eos_token": False,
        **tokens,
    })
    return path


def write_preprocessor_config(directory: str | Path, image_size: int, resample: int = 3) -> Path:
    """Write a SiglipImageProcessor ``preprocessor_config.json`` (square, output in [-1, 1])."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    return _write_json(directory / "preprocessor_config.json", {
        "image_processor_type": "SiglipImageProcessor",
        "do_resize": True,
        "size": {"height": image_size, "width": image_size},
        "resample": resample,
        "do_rescale": True,
        "rescale_factor": 1 / 255,
        "do_normalize": True,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
    })


def _floats(values: np.ndarray) -> list[float]:
    # Round through float32 so the file holds exactly the values a float32 reader gets.
    return [float(v) for v in values.astype(np.float32)]


def _stats(rng: np.random.Generator, used: int, dim: int = 32) -> dict[str, list[float]]:
    """Random mean/std/min/max over ``dim`` dims; dims past ``used`` are constant-zero padding."""
    mean = np.zeros(dim)
    std = np.zeros(dim)
    mean[:used] = rng.normal(0.0, 0.5, used)
    std[:used] = rng.uniform(0.05, 1.0, used)
    return {"mean": _floats(mean), "std": _floats(std),
            "min": _floats(mean - 2.0 * std), "max": _floats(mean + 2.0 * std)}


def write_norm_stats(
    directory: str | Path, rng_or_seed: int | np.random.Generator = 0, wrapped: bool = True
) -> Path:
    """Write a random 32-d ``norm_stats.json`` (state uses 8 dims, action 7; std 0 beyond).

    ``wrapped`` puts the mapping under ``"norm_stats"`` as Dexbotic's stats step does; unwrapped is
    the form its trainer copies into checkpoints. Deterministic for a given seed.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(rng_or_seed)
    stats = {"default": {"min": -1.0, "max": 1.0},
             "action": _stats(rng, used=7), "state": _stats(rng, used=8)}
    return _write_json(directory / "norm_stats.json", {"norm_stats": stats} if wrapped else stats)


__all__ = [
    "task_corpus",
    "write_norm_stats",
    "write_preprocessor_config",
    "write_sentencepiece_tokenizer",
]
