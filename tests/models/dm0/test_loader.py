"""Loading DM0 checkpoints: layouts and dtypes that must work, bad inputs that must fail clearly."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from dexrl.checkpoints.policy import load_policy
from dexrl.errors import DexrlError
from dexrl.models.dm0.config import Dm0Config
from dexrl.models.dm0.policy import Dm0Policy
from dexrl.models.dm0.tiny import write_tiny_dm0
from dexrl.models.dm0.vision import PeVisionConfig


def _edit_config(ckpt: Path, change: Callable[[dict], object]) -> None:
    path = ckpt / "config.json"
    config = json.loads(path.read_text())
    change(config)
    path.write_text(json.dumps(config))


def _edit_weights(ckpt: Path, change: Callable[[dict], object]) -> None:
    path = ckpt / "model.safetensors"
    state = load_file(str(path))
    change(state)
    save_file(state, str(path))


def _load_error(ckpt: Path) -> DexrlError:
    with pytest.raises(DexrlError) as info:
        load_policy(ckpt)
    return info.value


def test_sharded_bf16_checkpoint_with_unwrapped_stats(tmp_path: Path, tiny_dm0_dir: Path) -> None:
    ckpt = write_tiny_dm0(tmp_path / "ckpt", shards=3, dtype=torch.bfloat16,
                          wrapped_norm_stats=False, extra_keys=False)
    assert len(list(ckpt.glob("model-*-of-00003.safetensors"))) == 3
    net = load_policy(ckpt).network
    assert net.model.llm.layers[0].mlp.up_proj.weight.dtype == torch.bfloat16  # checkpoint's
    assert net.model.llm.layers[0].input_layernorm.weight.dtype == torch.float32
    as_fp32 = Dm0Policy.load_network(ckpt, dtype=torch.float32)
    reference = Dm0Policy.load_network(tiny_dm0_dir)
    for name, param in as_fp32.state_dict().items():  # same seed: the bf16-rounded fp32 weights
        torch.testing.assert_close(param, reference.state_dict()[name].bfloat16().float())


def test_config_without_vision_config_uses_pe_lang_l14_728(tiny_dm0_dir: Path) -> None:
    data = json.loads((tiny_dm0_dir / "config.json").read_text())
    del data["vision_config"]
    config = Dm0Config.from_dict(data)
    assert config.vision == PeVisionConfig()
    assert (config.vision.image_size, config.vision.patch_size, config.vision.width) == (728, 14,
                                                                                         1024)
    assert (config.vision.layers, config.vision.heads) == (23, 16)
    assert config.projector_type == "linear4x" and not config.projector_bias


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c.update(mm_projector_type="mlp2x_gelu"), "DM0 needs 'linear4x'"),
        (lambda c: c.pop("mm_projector_type"), "mm_projector_type is None"),
        (lambda c: c.update(mm_vision_tower="siglip"), "supports only 'pe_lang_l14_728'"),
        (lambda c: c["vision_config"].update(depth=3), "unknown keys \\['depth'\\]"),
        (lambda c: c["vision_config"].update(heads=3), "multiple of 4"),
        (lambda c: c.update(vision_config="pe"), "must be an object"),
        (lambda c: c["action_config"].update(model_type="gemma"), "expected 'qwen3'"),
        (lambda c: c["action_config"].update(head_dim=8), "cannot share attention"),
        (lambda c: c.update(chunk_size=0), "'chunk_size' must be a positive integer"),
        (lambda c: c.update(projector_bias=True), "weights hold linear without bias"),
    ],
)
def test_bad_config(tiny_dm0_copy: Callable[[], Path], change, message: str) -> None:
    ckpt = tiny_dm0_copy()
    _edit_config(ckpt, change)
    error = _load_error(ckpt)
    assert error.where == str(ckpt / "config.json")
    assert re.search(message, error.message), error.message


def test_wrong_shape_names_the_tensor(tiny_dm0_copy: Callable[[], Path]) -> None:
    ckpt = tiny_dm0_copy()
    key = "model.mm_vision_tower.vision_tower.vit_downsampler1.weight"
    _edit_weights(ckpt, lambda s: s.update({key: torch.zeros(16, 16, 3, 3)}))
    error = _load_error(ckpt)
    assert error.where == str(ckpt / "model.safetensors")
    assert any(key in d and "checkpoint (16, 16, 3, 3)" in d for d in error.details)


def test_vision_config_that_disagrees_with_the_weights(tiny_dm0_copy: Callable[[], Path]) -> None:
    ckpt = tiny_dm0_copy()
    _edit_config(ckpt, lambda c: c["vision_config"].update(image_size=42))
    error = _load_error(ckpt)
    assert error.code == "model-weights-mismatch"
    assert any("positional_embedding" in d for d in error.details)


def test_missing_and_unexpected_tensors(tiny_dm0_copy: Callable[[], Path]) -> None:
    ckpt = tiny_dm0_copy()
    gamma = "model.mm_vision_tower.vision_tower.transformer.resblocks.1.ls_1.gamma"

    def change(state: dict) -> None:
        del state[gamma]
        state["model.state_proj.weight"] = torch.zeros(16, 32)  # π0's, not DM0's

    _edit_weights(ckpt, change)
    error = _load_error(ckpt)
    assert any(gamma in d for d in error.details)
    assert any("model.state_proj.weight" in d for d in error.details)


@pytest.mark.parametrize("name", ["vocab.json", "merges.txt", "norm_stats.json"])
def test_missing_side_files(tiny_dm0_copy: Callable[[], Path], name: str) -> None:
    ckpt = tiny_dm0_copy()
    (ckpt / name).unlink()
    error = _load_error(ckpt)
    assert error.where == str(ckpt / name)


def test_tokenizer_larger_than_the_embedding_table(tiny_dm0_copy: Callable[[], Path]) -> None:
    ckpt = tiny_dm0_copy()
    vocab = len(json.loads((ckpt / "vocab.json").read_text()))
    _edit_config(ckpt, lambda c: c.update(vocab_size=vocab))

    def shrink(state: dict) -> None:
        state["model.llm.embed_tokens.weight"] = state["model.llm.embed_tokens.weight"][:vocab]

    _edit_weights(ckpt, shrink)
    error = _load_error(ckpt)
    assert error.code == "tokenizer-vocab-mismatch" and error.code == "tokenizer-vocab-mismatch"
