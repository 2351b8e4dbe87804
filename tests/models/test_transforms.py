"""norm_stats.json reading, normalization and the state/action pipelines of the policy."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from dexrl.errors import DexrlError
from dexrl.models.tiny_files import write_norm_stats
from dexrl.models.transforms import (
    NormStats,
    actions_to_env,
    denormalize,
    normalize,
    pad_to,
    state_to_model,
)


def _load_raw(path: Path) -> dict:
    data = json.loads(path.read_text())
    return data.get("norm_stats", data)


@pytest.fixture
def stats_file(tmp_path: Path) -> Path:
    return write_norm_stats(tmp_path, 7)


def test_wrapped_and_unwrapped_files_give_the_same_stats(tmp_path: Path) -> None:
    wrapped = NormStats.from_file(write_norm_stats(tmp_path / "a", 3, wrapped=True))
    unwrapped = NormStats.from_file(write_norm_stats(tmp_path / "b", 3, wrapped=False))
    raw = _load_raw(tmp_path / "a" / "norm_stats.json")
    assert "norm_stats" in json.loads((tmp_path / "a" / "norm_stats.json").read_text())
    assert "norm_stats" not in json.loads((tmp_path / "b" / "norm_stats.json").read_text())
    for part in ("state", "action"):
        a, b = getattr(wrapped, part), getattr(unwrapped, part)
        for field, key in (("mean", "mean"), ("std", "std"), ("q01", "min"), ("q99", "max")):
            value = getattr(a, field)
            assert value.dtype == torch.float32 and value.shape == (32,)
            assert torch.equal(value, getattr(b, field))
            assert value.tolist() == raw[part][key]


def test_writer_is_deterministic_and_pads_with_zero_std(tmp_path: Path) -> None:
    first = write_norm_stats(tmp_path / "a", 5).read_text()
    assert first == write_norm_stats(tmp_path / "b", np.random.default_rng(5)).read_text()
    assert first != write_norm_stats(tmp_path / "c", 6).read_text()
    stats = NormStats.from_file(tmp_path / "a" / "norm_stats.json")
    assert stats.state.std[:8].min() > 0 and not stats.state.std[8:].any()
    assert stats.action.std[:7].min() > 0 and not stats.action.std[7:].any()


def test_short_stats_are_padded_to_identity(tmp_path: Path) -> None:
    stats = NormStats.from_mapping({
        "state": {"mean": [1.0, 2.0], "std": [2.0, 4.0]},
        "action": {"q01": [0.0], "q99": [2.0], "mean": [1.0], "std": [1.0]},
    })
    assert stats.state.mean.tolist() == [1.0, 2.0] + [0.0] * 30
    assert stats.state.std.tolist() == [2.0, 4.0] + [1.0] * 30
    assert stats.state.q01 is None
    assert stats.action.q01.tolist() == [0.0] + [-1.0] * 31
    x = torch.randn(4, 32)
    for mode, part in (("mean_std", stats.state), ("quantile", stats.action)):
        assert torch.allclose(normalize(x, part, mode)[:, 2:], x[:, 2:], atol=1e-5)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "cannot read JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"action": {"mean": [0], "std": [1]}}', "missing 'state'"),
        ('{"norm_stats": {"state": {"mean": [0]}, "action": {}}}', "missing 'std'"),
        ('{"state": {"mean": [0, 1], "std": [1]}, "action": {"mean": [0], "std": [1]}}',
         "different lengths"),
        ('{"state": {"mean": "x", "std": [1]}, "action": {"mean": [0], "std": [1]}}',
         "not a list of numbers"),
        ('{"state": {"mean": [], "std": []}, "action": {"mean": [0], "std": [1]}}',
         "1..32 finite numbers"),
        ('{"state": {"mean": [0], "std": [-1]}, "action": {"mean": [0], "std": [1]}}',
         "negative"),
        ('{"state": {"mean": [0], "std": [1], "min": [0]}, "action": {"mean": [0], "std": [1]}}',
         "both 'min' and 'max'"),
    ],
)
def test_bad_files_raise_user_errors_naming_the_file(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "norm_stats.json"
    path.write_text(content)
    with pytest.raises(DexrlError, match=message) as info:
        NormStats.from_file(path)
    assert str(path) in info.value.where and info.value.hint


def test_too_long_and_missing_files(tmp_path: Path) -> None:
    path = tmp_path / "norm_stats.json"
    path.write_text(json.dumps({"state": {"mean": [0] * 33, "std": [1] * 33},
                                "action": {"mean": [0], "std": [1]}}))
    with pytest.raises(DexrlError, match="1..32") as err:
        NormStats.from_file(path)
    assert err.value.code == "norm-stats-invalid"
    with pytest.raises(DexrlError) as info:
        NormStats.from_file(tmp_path / "missing" / "norm_stats.json")
    assert info.value.code == "norm-stats-missing"
    assert "missing" in info.value.where


def test_quantile_mode_needs_quantiles_and_modes_are_checked() -> None:
    stats = NormStats.from_mapping({"state": {"mean": [0], "std": [1]},
                                    "action": {"mean": [0], "std": [1]}})
    with pytest.raises(DexrlError) as err:
        normalize(torch.zeros(1, 32), stats.state, "quantile")
    assert err.value.code == "norm-stats-no-quantiles"
    with pytest.raises(DexrlError) as err:
        normalize(torch.zeros(1, 32), stats.state, "minmax")  # type: ignore[arg-type]
    assert err.value.code == "norm-mode-unknown"


@pytest.mark.parametrize("mode", ["mean_std", "quantile"])
def test_normalize_formula_and_round_trip(stats_file: Path, mode: str) -> None:
    stats = NormStats.from_file(stats_file)
    raw = _load_raw(stats_file)["action"]
    x = np.random.default_rng(0).normal(size=(3, 32))
    x[:, 7:] = 0.0  # padded dims are zero in practice
    if mode == "mean_std":
        expected = (x - np.array(raw["mean"])) / (np.array(raw["std"]) + 1e-6)
    else:
        lo, hi = np.array(raw["min"]), np.array(raw["max"])
        expected = (x - lo) / (hi - lo + 1e-6) * 2 - 1
    got = normalize(x, stats.action, mode)
    assert got.dtype == torch.float32 and torch.isfinite(got).all()
    assert np.allclose(got.numpy(), expected, rtol=1e-5, atol=1e-5)
    back = denormalize(got, stats.action, mode)
    assert np.allclose(back.numpy(), x, atol=1e-5)


def test_pad_to() -> None:
    padded = pad_to(np.ones((2, 8), dtype=np.float64))
    assert padded.dtype == torch.float32 and padded.shape == (2, 32)
    assert padded[:, :8].eq(1).all() and not padded[:, 8:].any()
    with pytest.raises(ValueError):
        pad_to(torch.zeros(1, 40))


def test_state_to_model(stats_file: Path) -> None:
    stats = NormStats.from_file(stats_file)
    states = torch.randn(4, 8, dtype=torch.float64)
    out = state_to_model(states, stats, "mean_std")
    assert out.dtype == torch.float32 and out.shape == (4, 32)
    mean, std = stats.state.mean[:8], stats.state.std[:8]
    assert torch.allclose(out[:, :8], (states.float() - mean) / (std + 1e-6))
    assert not out[:, 8:].any()  # zero pad, zero mean -> exactly zero


@pytest.mark.parametrize("mode", ["mean_std", "quantile"])
def test_actions_to_env_adds_state_except_gripper(stats_file: Path, mode: str) -> None:
    stats = NormStats.from_file(stats_file)
    rng = np.random.default_rng(1)
    raw = rng.normal(size=(2, 10, 32)).astype(np.float32)
    states = rng.normal(size=(2, 8)).astype(np.float32)
    out = actions_to_env(torch.from_numpy(raw), torch.from_numpy(states), stats, mode,
                         num_chunks=5)
    assert out.shape == (2, 5, 7) and out.dtype == torch.float32

    denorm = denormalize(raw, stats.action, mode).numpy()
    expected = denorm[:, :5, :7] + states[:, None, :7]
    expected[..., 6] = denorm[:, :5, 6]  # gripper is absolute
    assert np.allclose(out.numpy(), expected, atol=1e-6)

    # Numpy input and Dexbotic's denormalize-the-normalized-state route agree.
    model_states = state_to_model(states, stats, mode)
    via_norm = actions_to_env(raw, model_states, stats, mode, 5, states_normalized=True)
    assert torch.allclose(via_norm, out, atol=1e-5)

    # Other masks and env dims.
    all_delta = actions_to_env(raw, states, stats, mode, 3, env_dim=8, non_delta_mask=())
    assert np.allclose(all_delta.numpy(), denorm[:, :3, :8] + states[:, None, :8], atol=1e-6)


def test_actions_to_env_rejects_impossible_slices(stats_file: Path) -> None:
    stats = NormStats.from_file(stats_file)
    with pytest.raises(ValueError):
        actions_to_env(torch.zeros(1, 4, 32), torch.zeros(1, 8), stats, "mean_std", 5)
    with pytest.raises(ValueError):
        actions_to_env(torch.zeros(1, 4, 32), torch.zeros(1, 8), stats, "mean_std", 2,
                       env_dim=33)
