"""Checkpoint verification without loading weights: safetensors headers, π0 names/shapes, stats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from dexrl.checkpoints.files.headers import HeaderError, read_header
from dexrl.checkpoints.verify import verify_checkpoint
from dexrl.models.pi0.tiny import write_tiny_pi0
from dexrl.models.tiny_files import write_norm_stats


def errors_of(path: Path) -> str:
    result = verify_checkpoint(path)
    assert not result.ok
    return "\n".join(f"{f.where}: {f.message}" for f in result.findings)


def codes_of(path: Path) -> list[str]:
    """The codes of what the verification found (it must have found a problem)."""
    result = verify_checkpoint(path)
    assert not result.ok
    return [f.code for f in result.findings]


def test_header_gives_names_shapes_dtypes(tmp_path: Path) -> None:
    save_file({"a": torch.zeros(2, 3, dtype=torch.bfloat16), "b": torch.zeros(4)},
              str(tmp_path / "w.safetensors"), metadata={"format": "pt"})
    header = read_header(tmp_path / "w.safetensors")
    assert {k: (v.dtype, v.shape) for k, v in header.items()} == {
        "a": ("BF16", (2, 3)), "b": ("F32", (4,))}


@pytest.mark.parametrize("cut", [1, 100, 10_000])
def test_truncated_file_is_caught(tmp_path: Path, cut: int) -> None:
    path = tmp_path / "w.safetensors"
    save_file({"a": torch.zeros(5000)}, str(path))
    data = path.read_bytes()
    path.write_bytes(data[:-cut])
    with pytest.raises(HeaderError):
        read_header(path)


def test_garbage_is_not_a_header(tmp_path: Path) -> None:
    path = tmp_path / "w.safetensors"
    path.write_bytes((20).to_bytes(8, "little") + b"not json at all....." + b"\0" * 8)
    with pytest.raises(HeaderError, match="not JSON"):
        read_header(path)


def test_tiny_pi0_verifies(tiny_pi0_dir: Path) -> None:
    result = verify_checkpoint(tiny_pi0_dir, "dexbotic_pi0")
    assert result.ok, result.findings
    assert result.model_type == "dexbotic_pi0"
    assert result.checks == ["files", "weight headers", "tensor names and shapes", "norm stats"]
    expected = sum(t.numel() for t in _tensors(tiny_pi0_dir).values())
    assert result.weights.parameters == expected


def test_sharded_with_unused_extras_verifies(tmp_path: Path) -> None:
    path = write_tiny_pi0(tmp_path / "c", shards=3, extra_keys=True, dtype=torch.bfloat16)
    result = verify_checkpoint(path)
    assert result.ok, result.findings
    assert result.weights.files == 3
    assert set(result.weights.dtype_elements) == {"BF16"}


def test_config_that_does_not_match_the_weights(tiny_pi0_copy) -> None:
    path = tiny_pi0_copy()
    cfg = json.loads((path / "config.json").read_text())
    cfg["action_config"]["intermediate_size"] *= 2
    (path / "config.json").write_text(json.dumps(cfg))
    assert codes_of(path) == ["model-weights-mismatch"]


def test_missing_tensor_is_named(tiny_pi0_copy) -> None:
    path = tiny_pi0_copy()
    state = _tensors(path)
    state.pop("model.state_proj.weight")
    save_file(state, str(path / "model.safetensors"))
    assert codes_of(path) == ["model-weights-mismatch"]
    assert "model.state_proj.weight" in errors_of(path)  # the missing tensor is named


def test_wrong_projector_type(tiny_pi0_copy) -> None:
    path = tiny_pi0_copy()
    cfg = json.loads((path / "config.json").read_text())
    cfg["mm_projector_type"] = "linear"
    (path / "config.json").write_text(json.dumps(cfg))
    assert codes_of(path) == ["model-projector-mismatch"]


def test_truncated_weights_in_a_checkpoint(tiny_pi0_copy) -> None:
    path = tiny_pi0_copy()
    weights = path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-64])
    assert codes_of(path) == ["model-weights-unreadable"]
    assert "truncated" in errors_of(path)  # says why


def test_shard_index_naming_the_wrong_file(tmp_path: Path) -> None:
    path = write_tiny_pi0(tmp_path / "c", shards=2)
    index = json.loads((path / "model.safetensors.index.json").read_text())
    key = next(iter(index["weight_map"]))
    shards = sorted(set(index["weight_map"].values()))
    index["weight_map"][key] = next(s for s in shards if s != index["weight_map"][key])
    (path / "model.safetensors.index.json").write_text(json.dumps(index))
    assert codes_of(path) == ["model-weights-index-wrong-shard"]


def test_bad_norm_stats(tiny_pi0_copy) -> None:
    path = tiny_pi0_copy()
    (path / "norm_stats.json").write_text(json.dumps({"action": {"mean": [0.0] * 40}}))
    assert set(codes_of(path)) == {"norm-stats-invalid"}
    assert "norm_stats.json" in errors_of(path)


def test_missing_tokenizer_and_processor(tiny_pi0_copy) -> None:
    path = tiny_pi0_copy()
    (path / "tokenizer.model").unlink()
    (path / "preprocessor_config.json").unlink()
    assert codes_of(path) == ["tokenizer-missing", "model-preprocessor-missing"]


def test_not_a_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("hello")
    result = verify_checkpoint(tmp_path)
    assert not result.ok and result.checks == [] and result.model_type is None


def test_dm0_checks_files_and_stats_but_says_tensors_are_unchecked(tmp_path: Path) -> None:
    path = tmp_path / "dm0"
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"model_type": "dexbotic_dm0"}))
    for name in ("vocab.json", "tokenizer_config.json"):
        (path / name).write_text("{}")
    (path / "merges.txt").write_text("#version: 0.2\n")
    write_norm_stats(path, 0)
    save_file({"model.action_in_proj.weight": torch.zeros(8, 32)},
              str(path / "model.safetensors"))
    result = verify_checkpoint(path, "dexbotic_dm0")
    assert result.ok, result.findings
    assert "tensor names and shapes" not in result.checks
    assert result.checks == ["files", "weight headers", "norm stats"]
    assert any("not checked for dexbotic_dm0" in n for n in result.notes)
    (path / "model.safetensors").write_bytes(b"\0" * 4)
    assert codes_of(path) == ["model-weights-unreadable"]


def test_model_type_mismatch(tiny_pi0_dir: Path) -> None:
    result = verify_checkpoint(tiny_pi0_dir, "dexbotic_dm0")
    assert [f.code for f in result.findings] == ["model-type-mismatch"]


def _tensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    state = {}
    for file in sorted(path.glob("*.safetensors")):
        state.update(load_file(str(file)))
    return state
