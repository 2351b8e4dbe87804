"""DM0 prompt tokenization against transformers' slow Qwen2Tokenizer on a tiny BPE vocabulary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import Qwen2Tokenizer

from dexrl.errors import DexrlError
from dexrl.models.dm0.tiny import TINY_PROMPT_LENGTH, write_qwen_tokenizer
from dexrl.models.dm0.tokenization import SYSTEM_PROMPT, Dm0PromptTokenizer, clean_prompt_dm0


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("qwen_tok")
    write_qwen_tokenizer(directory)
    return directory


@pytest.fixture(scope="module")
def reference(tokenizer_dir: Path) -> Qwen2Tokenizer:
    return Qwen2Tokenizer.from_pretrained(str(tokenizer_dir), local_files_only=True)


@pytest.fixture(scope="module")
def tokenizer(tokenizer_dir: Path) -> Dm0PromptTokenizer:
    return Dm0PromptTokenizer.from_checkpoint(tokenizer_dir)


def _segments(reference: Qwen2Tokenizer, prompt: str) -> list[int]:
    """Dexbotic's step format for an inference turn: each segment encoded on its own."""
    ids = []
    for segment in (SYSTEM_PROMPT + " ", "USER: ", prompt + " "):
        ids += reference.encode(segment, add_special_tokens=False)
    return ids


def test_chat_format_padding_and_mask(tokenizer: Dm0PromptTokenizer, reference) -> None:
    prompts = ["pick up the black bowl and place it on the plate", "open the top drawer"]
    ids, mask = tokenizer(prompts)
    assert ids.shape == mask.shape == (2, TINY_PROMPT_LENGTH)
    assert ids.dtype == torch.long and mask.dtype == torch.bool
    for row, prompt in enumerate(prompts):
        expected = _segments(reference, prompt)
        count = len(expected)
        assert ids[row, :count].tolist() == expected
        assert mask[row].tolist() == [True] * count + [False] * (TINY_PROMPT_LENGTH - count)
        assert (ids[row, count:] == reference.pad_token_id).all()
        # No special tokens, no assistant turn: the text decodes back to the three segments.
        text = reference.decode(ids[row, :count].tolist())
        assert text == f"{SYSTEM_PROMPT} USER: {prompt} "
    assert reference.convert_ids_to_tokens(reference.pad_token_id) == "<|endoftext|>"


def test_segments_are_encoded_separately(tokenizer: Dm0PromptTokenizer, reference) -> None:
    prompt = "the butter in the basket"
    ids, mask = tokenizer([prompt])
    joined = reference.encode(f"{SYSTEM_PROMPT} USER: {prompt} ", add_special_tokens=False)
    # Encoded in one go, the space after "USER:" joins the next word ("Ġthe"); per segment it
    # stays a token of its own.
    assert ids[0, mask[0]].tolist() != joined
    assert reference.convert_tokens_to_ids("Ġthe") in joined


def test_prompt_cleaning_keeps_underscores(tokenizer: Dm0PromptTokenizer, reference) -> None:
    assert clean_prompt_dm0("  put the_butter\nin the basket \n") == "put the_butter in the basket"
    ids, mask = tokenizer(["  put the_butter\nin the basket \n"])
    assert ids[0, mask[0]].tolist() == _segments(reference, "put the_butter in the basket")
    spaced, _ = tokenizer(["put the butter in the basket"])
    assert not torch.equal(ids, spaced)


def test_empty_prompt_and_truncation(tokenizer_dir: Path, reference) -> None:
    full = Dm0PromptTokenizer.from_checkpoint(tokenizer_dir)
    ids, mask = full(["   "])
    head = reference.encode(SYSTEM_PROMPT + " ", add_special_tokens=False) + reference.encode(
        "USER: ", add_special_tokens=False
    )
    assert ids[0, mask[0]].tolist() == head  # an empty prompt adds no segment
    short = Dm0PromptTokenizer.from_checkpoint(tokenizer_dir, model_max_length=10)
    ids, mask = short(["open the drawer"])
    assert ids.shape == (1, 10) and mask.all()
    assert ids[0].tolist() == head[:10]


def test_vocab_size_counts_added_tokens(tokenizer: Dm0PromptTokenizer, reference) -> None:
    assert tokenizer.vocab_size == len(reference) == len(reference.get_vocab())
    assert tokenizer.vocab_size > reference.vocab_size  # the specials come after the BPE vocab
    with pytest.raises(TypeError):
        tokenizer("a single string")


@pytest.mark.parametrize("missing", ["vocab.json", "merges.txt"])
def test_missing_tokenizer_files(tokenizer_dir: Path, tmp_path: Path, missing: str) -> None:
    for name in ("vocab.json", "merges.txt", "tokenizer_config.json"):
        if name != missing:
            (tmp_path / name).write_bytes((tokenizer_dir / name).read_bytes())
    with pytest.raises(DexrlError, match=f"{missing} not found") as info:
        Dm0PromptTokenizer.from_checkpoint(tmp_path)
    assert info.value.where == str(tmp_path / missing)


def _edited_config(tokenizer_dir: Path, tmp_path: Path, **changes) -> Path:
    tmp_path.mkdir()
    for name in ("vocab.json", "merges.txt"):
        (tmp_path / name).write_bytes((tokenizer_dir / name).read_bytes())
    config = json.loads((tokenizer_dir / "tokenizer_config.json").read_text())
    config.update(changes)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    return tmp_path


def test_bad_tokenizer_config(tokenizer_dir: Path, tmp_path: Path) -> None:
    wrong = _edited_config(tokenizer_dir, tmp_path / "a", tokenizer_class="GemmaTokenizer")
    with pytest.raises(DexrlError, match="tokenizer_class is 'GemmaTokenizer'") as err:
        Dm0PromptTokenizer.from_checkpoint(wrong)
    assert err.value.code == "tokenizer-class-unsupported"
    unset = _edited_config(tokenizer_dir, tmp_path / "b", model_max_length=int(1e30))
    with pytest.raises(DexrlError) as info:
        Dm0PromptTokenizer.from_checkpoint(unset)
    assert info.value.code == "tokenizer-max-length-invalid"
    assert info.value.where == str(unset / "tokenizer_config.json")
    no_pad = _edited_config(tokenizer_dir, tmp_path / "d", pad_token=None)
    with pytest.raises(DexrlError) as err:
        Dm0PromptTokenizer.from_checkpoint(no_pad)
    assert err.value.code == "tokenizer-special-tokens"
    corrupt = _edited_config(tokenizer_dir, tmp_path / "c")
    (corrupt / "vocab.json").write_text("{not json")
    with pytest.raises(DexrlError) as err:
        Dm0PromptTokenizer.from_checkpoint(corrupt)
    assert err.value.code == "tokenizer-unreadable"
