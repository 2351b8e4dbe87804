"""Loading checkpoint directories (:func:`dexrl.checkpoints.policy.load_policy`), Dexbotic π0 and
DM0: key accounting, shards, dtypes, layouts, bad files that must fail clearly."""

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
from dexrl.models.pi0.policy import Pi0Policy
from dexrl.models.pi0.tiny import write_tiny_pi0

Copy = Callable[[], Path]


def _edit_weights(ckpt: Path, edit: Callable[[dict[str, torch.Tensor]], None]) -> Path:
    path = ckpt / "model.safetensors"
    state = load_file(str(path))
    edit(state)
    save_file(state, str(path))
    return path


def _edit_config(ckpt: Path, edit: Callable[[dict], None]) -> None:
    path = ckpt / "config.json"
    config = json.loads(path.read_text())
    edit(config)
    path.write_text(json.dumps(config))


def _load_error(ckpt: Path) -> DexrlError:
    with pytest.raises(DexrlError) as info:
        Pi0Policy.load_network(ckpt)
    return info.value


def test_missing_weight_is_named(tiny_pi0_copy: Copy) -> None:
    ckpt = tiny_pi0_copy()
    path = _edit_weights(ckpt, lambda s: s.pop("model.action_expert.norm.weight"))
    error = _load_error(ckpt)
    assert error.where == str(path)
    assert any("missing" in d and "model.action_expert.norm.weight" in d for d in error.details)


def test_unexpected_weights_are_listed_with_count(tiny_pi0_copy: Copy) -> None:
    ckpt = tiny_pi0_copy()

    def add(state: dict[str, torch.Tensor]) -> None:
        for i in range(7):
            state[f"model.extra.{i}.weight"] = torch.zeros(2)
        state["lm_head.weight"] = torch.zeros(2)

    _edit_weights(ckpt, add)
    (detail,) = _load_error(ckpt).details
    assert detail.startswith("unexpected checkpoint weights (8)")
    assert "lm_head.weight" in detail and "and 3 more" in detail


def test_shape_mismatch_is_named(tiny_pi0_copy: Copy) -> None:
    ckpt = tiny_pi0_copy()
    _edit_weights(ckpt, lambda s: s.update({"model.state_proj.weight": torch.zeros(16, 8)}))
    (detail,) = _load_error(ckpt).details
    assert "model.state_proj.weight (checkpoint (16, 8), model (16, 32))" in detail


def test_allowed_extra_keys_are_tolerated(tmp_path: Path, tiny_pi0_dir: Path) -> None:
    ckpt = write_tiny_pi0(tmp_path / "extra", seed=0, extra_keys=True)
    assert "model.action_expert.embed_tokens.weight" in load_file(str(ckpt / "model.safetensors"))
    net = Pi0Policy.load_network(ckpt)
    reference = Pi0Policy.load_network(tiny_pi0_dir)
    assert net.model.action_expert.embed_tokens is None
    ours, theirs = net.state_dict(), reference.state_dict()
    assert ours.keys() == theirs.keys()
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)


def test_sharded_equals_single(tmp_path: Path, tiny_pi0_dir: Path) -> None:
    ckpt = write_tiny_pi0(tmp_path / "sharded", seed=0, shards=2)
    assert sorted(p.name for p in ckpt.glob("*.safetensors")) == [
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    ]
    assert (ckpt / "model.safetensors.index.json").is_file()
    single = Pi0Policy.load_network(tiny_pi0_dir).state_dict()
    sharded = Pi0Policy.load_network(ckpt).state_dict()
    assert single.keys() == sharded.keys()
    assert all(torch.equal(single[k], sharded[k]) for k in single)


def test_missing_shard_names_the_index(tmp_path: Path) -> None:
    ckpt = write_tiny_pi0(tmp_path / "sharded", seed=0, shards=2)
    (ckpt / "model-00002-of-00002.safetensors").unlink()
    error = _load_error(ckpt)
    assert error.where == str(ckpt / "model.safetensors.index.json")
    assert error.code == "model-weights-shards-missing"
    assert "model-00002-of-00002.safetensors" in error.message


def test_bf16_checkpoint_keeps_its_dtype_unless_asked(tmp_path: Path) -> None:
    ckpt = write_tiny_pi0(tmp_path / "bf16", seed=0, dtype=torch.bfloat16)
    as_saved = Pi0Policy.load_network(ckpt)
    assert {p.dtype for p in as_saved.parameters()} == {torch.bfloat16}
    as_fp32 = Pi0Policy.load_network(ckpt, dtype=torch.float32)
    assert {p.dtype for p in as_fp32.parameters()} == {torch.float32}
    key = "model.llm.layers.0.self_attn.q_proj.weight"
    assert torch.equal(as_fp32.state_dict()[key], as_saved.state_dict()[key].float())


def test_projector_type_defaults_to_mlp2x_gelu_when_absent(tiny_pi0_copy: Copy) -> None:
    ckpt = tiny_pi0_copy()
    _edit_config(ckpt, lambda c: c.pop("mm_projector_type"))
    assert Pi0Policy.load_network(ckpt).config.projector_type == "mlp2x_gelu"


def test_projector_type_mismatch_is_reported(tiny_pi0_copy: Copy) -> None:
    ckpt = tiny_pi0_copy()
    _edit_config(ckpt, lambda c: c.update(mm_projector_type="linear"))
    error = _load_error(ckpt)
    assert error.code == "model-projector-mismatch"
    assert "'linear'" in error.message and "mlp2x_gelu" in error.message
    assert error.where == str(ckpt / "config.json")


@pytest.mark.parametrize("projector", ["linear", "linear1x"])
def test_linear_projectors_load_and_run(tmp_path: Path, projector: str) -> None:
    ckpt = write_tiny_pi0(tmp_path / projector, seed=0, projector=projector)
    names = set(load_file(str(ckpt / "model.safetensors")))
    assert ("model.mm_projector.bias" in names) == (projector == "linear")
    net = Pi0Policy.load_network(ckpt)
    assert net.model.mm_projector.weight.shape == (32, 24)


def test_absent_projector_type_with_linear_weights_fails(tmp_path: Path) -> None:
    ckpt = write_tiny_pi0(tmp_path / "linear", seed=0, projector="linear")
    _edit_config(ckpt, lambda c: c.pop("mm_projector_type"))
    error = _load_error(ckpt)
    message = error.message
    assert error.code == "model-projector-mismatch"
    assert "no mm_projector_type (Dexbotic default 'mlp2x_gelu')" in message
    assert "weights hold linear" in message


def test_corrupt_safetensors_names_the_file(tiny_pi0_copy: Copy) -> None:
    ckpt = tiny_pi0_copy()
    path = ckpt / "model.safetensors"
    path.write_bytes(path.read_bytes()[:200])
    error = _load_error(ckpt)
    assert error.where == str(path) and error.code == "model-weights-unreadable"


@pytest.mark.parametrize("content", [b"", b"not a safetensors file at all"])
def test_garbage_safetensors_names_the_file(tiny_pi0_copy: Copy, content: bytes) -> None:
    ckpt = tiny_pi0_copy()
    (ckpt / "model.safetensors").write_bytes(content)
    assert _load_error(ckpt).where == str(ckpt / "model.safetensors")


@pytest.mark.parametrize("name", ["tokenizer.model", "preprocessor_config.json", "norm_stats.json"])
def test_missing_side_files_name_the_file(tiny_pi0_copy: Copy, name: str) -> None:
    ckpt = tiny_pi0_copy()
    (ckpt / name).unlink()
    with pytest.raises(DexrlError) as info:
        load_policy(ckpt)
    assert info.value.where == str(ckpt / name)


def test_missing_weights_and_config(tiny_pi0_copy: Copy) -> None:
    ckpt = tiny_pi0_copy()
    (ckpt / "model.safetensors").unlink()
    assert _load_error(ckpt).code == "model-weights-missing"
    (ckpt / "config.json").unlink()
    error = _load_error(ckpt)
    assert error.where == str(ckpt / "config.json") and error.code == "model-file-missing"


def test_wrong_model_type(tiny_pi0_copy: Copy) -> None:
    ckpt = tiny_pi0_copy()
    _edit_config(ckpt, lambda c: c.update(model_type="paligemma"))
    assert _load_error(ckpt).code == "model-type-mismatch"
    with pytest.raises(DexrlError, match="'paligemma' is not supported") as err:
        load_policy(ckpt)
    assert err.value.code == "model-type-unsupported"


def test_dm0_model_type_goes_to_the_dm0_loader(tiny_pi0_copy: Copy) -> None:
    ckpt = tiny_pi0_copy()
    _edit_config(ckpt, lambda c: c.update(model_type="dexbotic_dm0"))
    with pytest.raises(DexrlError,
                       match="'llm_config.model_type' is 'gemma', expected 'qwen3'") as err:
        load_policy(ckpt)
    assert err.value.code == "model-config-invalid"


def test_towers_that_cannot_share_attention(tiny_pi0_copy: Copy) -> None:
    ckpt = tiny_pi0_copy()
    _edit_config(ckpt, lambda c: c["action_config"].update(num_hidden_layers=3))
    error = _load_error(ckpt)
    assert error.code == "model-towers-mismatch"
    assert error.details == ["num_hidden_layers: llm 2 vs expert 3"]


def test_sub_config_given_as_string_is_rejected(tiny_pi0_copy: Copy) -> None:
    ckpt = tiny_pi0_copy()
    _edit_config(ckpt, lambda c: c.update(vision_config="google/siglip-so400m-patch14-224"))
    assert _load_error(ckpt).code == "model-config-invalid"


def test_foreign_processor_path_is_ignored(tiny_pi0_dir: Path) -> None:
    foreign = json.loads((tiny_pi0_dir / "config.json").read_text())["processor_config"]
    assert foreign.startswith("/") and not Path(foreign).exists()
    policy = load_policy(tiny_pi0_dir)
    assert policy.images.size == (32, 32)


def test_unwrapped_norm_stats(tmp_path: Path) -> None:
    ckpt = write_tiny_pi0(tmp_path / "unwrapped", seed=0, wrapped_norm_stats=False)
    assert "norm_stats" not in json.loads((ckpt / "norm_stats.json").read_text())
    wrapped = load_policy(write_tiny_pi0(tmp_path / "wrapped", seed=0)).norm_stats
    assert torch.equal(load_policy(ckpt).norm_stats.action.mean, wrapped.action.mean)


# --- DM0: layouts and dtypes that must work, bad inputs that must fail clearly ---

def _edit_dm0_config(ckpt: Path, change: Callable[[dict], object]) -> None:
    path = ckpt / "config.json"
    config = json.loads(path.read_text())
    change(config)
    path.write_text(json.dumps(config))


def _edit_dm0_weights(ckpt: Path, change: Callable[[dict], object]) -> None:
    path = ckpt / "model.safetensors"
    state = load_file(str(path))
    change(state)
    save_file(state, str(path))


def _dm0_load_error(ckpt: Path) -> DexrlError:
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
    _edit_dm0_config(ckpt, change)
    error = _dm0_load_error(ckpt)
    assert error.where == str(ckpt / "config.json")
    assert re.search(message, error.message), error.message


def test_wrong_shape_names_the_tensor(tiny_dm0_copy: Callable[[], Path]) -> None:
    ckpt = tiny_dm0_copy()
    key = "model.mm_vision_tower.vision_tower.vit_downsampler1.weight"
    _edit_dm0_weights(ckpt, lambda s: s.update({key: torch.zeros(16, 16, 3, 3)}))
    error = _dm0_load_error(ckpt)
    assert error.where == str(ckpt / "model.safetensors")
    assert any(key in d and "checkpoint (16, 16, 3, 3)" in d for d in error.details)


def test_vision_config_that_disagrees_with_the_weights(tiny_dm0_copy: Callable[[], Path]) -> None:
    ckpt = tiny_dm0_copy()
    _edit_dm0_config(ckpt, lambda c: c["vision_config"].update(image_size=42))
    error = _dm0_load_error(ckpt)
    assert error.code == "model-weights-mismatch"
    assert any("positional_embedding" in d for d in error.details)


def test_missing_and_unexpected_tensors(tiny_dm0_copy: Callable[[], Path]) -> None:
    ckpt = tiny_dm0_copy()
    gamma = "model.mm_vision_tower.vision_tower.transformer.resblocks.1.ls_1.gamma"

    def change(state: dict) -> None:
        del state[gamma]
        state["model.state_proj.weight"] = torch.zeros(16, 32)  # π0's, not DM0's

    _edit_dm0_weights(ckpt, change)
    error = _dm0_load_error(ckpt)
    assert any(gamma in d for d in error.details)
    assert any("model.state_proj.weight" in d for d in error.details)


@pytest.mark.parametrize("name", ["vocab.json", "merges.txt", "norm_stats.json"])
def test_missing_side_files(tiny_dm0_copy: Callable[[], Path], name: str) -> None:
    ckpt = tiny_dm0_copy()
    (ckpt / name).unlink()
    error = _dm0_load_error(ckpt)
    assert error.where == str(ckpt / name)


def test_tokenizer_larger_than_the_embedding_table(tiny_dm0_copy: Callable[[], Path]) -> None:
    ckpt = tiny_dm0_copy()
    vocab = len(json.loads((ckpt / "vocab.json").read_text()))
    _edit_dm0_config(ckpt, lambda c: c.update(vocab_size=vocab))

    def shrink(state: dict) -> None:
        state["model.llm.embed_tokens.weight"] = state["model.llm.embed_tokens.weight"][:vocab]

    _edit_dm0_weights(ckpt, shrink)
    error = _dm0_load_error(ckpt)
    assert error.code == "tokenizer-vocab-mismatch" and error.code == "tokenizer-vocab-mismatch"
