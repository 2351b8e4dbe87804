"""π0 prompt tokenization against transformers' slow GemmaTokenizer on the same files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sentencepiece
import torch
import transformers

from dexrl.errors import DexrlError
from dexrl.models.pi0.tokenization import Pi0PromptTokenizer, clean_prompt_pi0
from dexrl.models.tiny_files import write_sentencepiece_tokenizer

PROMPTS = [
    "pick up the black bowl on the plate and place it in the basket",
    "  open_the top drawer\nof the cabinet ",
    "put the wine bottle on top of the cabinet",
    "Zürich ✓ unseen wörds",
    "",
]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("tokenizer")
    write_sentencepiece_tokenizer(directory, model_max_length=16)
    return directory


def test_clean_prompt() -> None:
    assert clean_prompt_pi0("  open_the\ndrawer \n") == "open the drawer"
    assert clean_prompt_pi0("a__b") == "a  b"


def test_matches_slow_gemma_tokenizer(checkpoint: Path) -> None:
    gemma = transformers.AutoTokenizer.from_pretrained(checkpoint, use_fast=False)
    assert type(gemma).__name__ == "GemmaTokenizer"
    ours = Pi0PromptTokenizer.from_checkpoint(checkpoint)
    assert ours.model_max_length == gemma.model_max_length == 16
    ids, mask = ours(PROMPTS)
    assert ids.dtype == torch.long and mask.dtype == torch.bool
    assert ids.shape == mask.shape == (len(PROMPTS), 16)

    newline = gemma.sp_model.encode("\n")
    for row, prompt in enumerate(PROMPTS):
        clean = clean_prompt_pi0(prompt)
        # The high-level slow-tokenizer path gives the same pieces as its sp_model here.
        text = gemma(clean).input_ids
        assert text == gemma.sp_model.encode(clean, add_bos=True)
        expected = (text + newline)[:16]
        expected += [gemma.pad_token_id] * (16 - len(expected))
        assert ids[row].tolist() == expected
        assert mask[row].tolist() == [i != gemma.pad_token_id for i in expected]


def test_layout_truncation_and_padding(checkpoint: Path) -> None:
    tokenizer = Pi0PromptTokenizer.from_checkpoint(checkpoint, model_max_length=40)
    ids, mask = tokenizer(PROMPTS)
    assert ids.shape == (len(PROMPTS), 40)
    assert (ids[:, 0] == tokenizer.sp.bos_id()).all()
    newline = tokenizer.sp.piece_to_id("\n")
    for row in range(len(PROMPTS)):
        length = int(mask[row].sum())
        assert mask[row, :length].all() and not mask[row, length:].any()
        assert not ids[row, length:].any()
        if length < 40:
            assert ids[row, length - 1] == newline
    assert ids[-1, :2].tolist() == [tokenizer.sp.bos_id(), newline]  # empty prompt
    short = Pi0PromptTokenizer.from_checkpoint(checkpoint, model_max_length=3)(PROMPTS[:1])[0]
    assert short.tolist() == [ids[0, :3].tolist()]


def test_missing_and_bad_files(tmp_path: Path, checkpoint: Path) -> None:
    with pytest.raises(DexrlError, match="tokenizer_config.json not found") as err:
        Pi0PromptTokenizer.from_checkpoint(tmp_path)
    assert err.value.code == "tokenizer-missing"
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 1e30}))
    with pytest.raises(DexrlError) as info:
        Pi0PromptTokenizer.from_checkpoint(tmp_path)
    assert info.value.code == "tokenizer-max-length-invalid"
    assert info.value.where.endswith("tokenizer_config.json") and "48" in info.value.hint
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 48}))
    with pytest.raises(DexrlError, match="tokenizer.model not found") as err:
        Pi0PromptTokenizer.from_checkpoint(tmp_path)
    assert err.value.code == "tokenizer-missing"
    (tmp_path / "tokenizer.model").write_bytes(b"not a model")
    with pytest.raises(DexrlError) as err:
        Pi0PromptTokenizer.from_checkpoint(tmp_path)
    assert err.value.code == "tokenizer-unreadable"


def test_single_string_is_rejected(checkpoint: Path) -> None:
    with pytest.raises(TypeError):
        Pi0PromptTokenizer.from_checkpoint(checkpoint)("pick up the bowl")


def test_tokenizer_without_gemma_pad_id_is_rejected(tmp_path: Path) -> None:
    sentencepiece.SentencePieceTrainer.train(  # default ids: unk 0, bos 1, eos 2, no pad
        sentence_iterator=iter(PROMPTS[:3] * 20), model_prefix=str(tmp_path / "tokenizer"),
        vocab_size=40, hard_vocab_limit=False, minloglevel=2,
    )
    with pytest.raises(DexrlError, match="pad id -1") as err:
        Pi0PromptTokenizer(tmp_path / "tokenizer.model", 16)
    assert err.value.code == "tokenizer-special-tokens"


def test_tiny_tokenizer_files_are_deterministic_with_gemma_ids(tmp_path: Path) -> None:
    first = write_sentencepiece_tokenizer(tmp_path / "a").read_bytes()
    assert first == write_sentencepiece_tokenizer(tmp_path / "b").read_bytes()
    sp = Pi0PromptTokenizer.from_checkpoint(tmp_path / "a").sp
    assert [sp.pad_id(), sp.eos_id(), sp.bos_id(), sp.unk_id()] == [0, 1, 2, 3]
    assert sp.encode("\n", out_type=str) == ["\n"]
    config = json.loads((tmp_path / "a" / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "GemmaTokenizer" and config["model_max_length"] == 16
