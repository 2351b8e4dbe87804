"""State/action normalization and the delta-to-absolute action transform of Dexbotic policies.

Model space is 32-d: env states (8-d) are zero-padded to 32 and normalized; the network predicts
normalized 32-d actions that are deltas to the state except for the gripper dim (6), which is
absolute. Everything here is float32, batch-first torch; numpy inputs are accepted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from dexrl.errors import DexrlError
from dexrl.models.choices import NORM_MODES

MODEL_DIM = 32
NormMode = Literal["mean_std", "quantile"]
_EPS = 1e-6

# Values that make a padded stats dim an identity map under both modes (Dexbotic's denorm pads
# short stats with mean 0 / std 1; the quantile pair (-1, 1) is the analogue for quantiles).
_PAD_VALUES = {"mean": 0.0, "std": 1.0, "q01": -1.0, "q99": 1.0}
# Dexbotic writes min/max (holding q01/q99); openpi-style files call them q01/q99.
_KEY_ALIASES = {"q01": ("min", "q01"), "q99": ("max", "q99")}

_STATS_HINT = (
    "use the norm_stats.json shipped with the checkpoint: "
    '{"norm_stats": {"action": {"mean": [...], "std": [...], "min": [...], "max": [...]}, '
    '"state": {...}}} (the outer "norm_stats" wrapper is optional)'
)


@dataclass(frozen=True)
class StatsPart:
    """Normalization statistics of one quantity (state or action), each a float32 [32] tensor.

    ``q01``/``q99`` (Dexbotic's ``min``/``max``) are ``None`` when the file has none; only
    ``quantile`` mode needs them.
    """

    mean: torch.Tensor
    std: torch.Tensor
    q01: torch.Tensor | None = None
    q99: torch.Tensor | None = None


@dataclass(frozen=True)
class NormStats:
    """The ``state`` and ``action`` statistics of a checkpoint's ``norm_stats.json``.

    Stats shorter than 32 dims are padded so that the extra dims map x to x (mean 0 / std 1,
    q01 -1 / q99 1), as Dexbotic's denormalization does; longer ones are rejected.
    """

    state: StatsPart
    action: StatsPart

    @classmethod
    def from_file(cls, path: str | Path, dim: int = MODEL_DIM) -> NormStats:
        """Read ``norm_stats.json`` in the wrapped (``{"norm_stats": ...}``) or unwrapped form.

        Raises:
            DexrlError: the file is missing, is not JSON, or lacks valid ``state``/``action`` stats.
        """
        path = Path(path)
        if not path.is_file():
            raise DexrlError(
                "norm_stats.json not found", _STATS_HINT + f"; put it at {path}", where=str(path),
                code="norm-stats-missing",
            )
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise DexrlError(f"cannot read JSON: {err}", _STATS_HINT, where=str(path),
                             code="model-json-unreadable") from err
        return cls.from_mapping(data, source=str(path), dim=dim)

    @classmethod
    def from_mapping(
        cls, data: Any, source: str = "norm_stats", dim: int = MODEL_DIM
    ) -> NormStats:
        """Build stats from parsed JSON (wrapped or unwrapped); ``source`` names it in errors.

        The optional ``default`` entry Dexbotic writes is not used by its transforms and is ignored.
        """
        if isinstance(data, Mapping) and isinstance(data.get("norm_stats"), Mapping):
            data = data["norm_stats"]
        if not isinstance(data, Mapping):
            raise DexrlError("expected a JSON object with 'state' and 'action'", _STATS_HINT,
                             where=source, code="norm-stats-invalid")
        parts = {}
        for name in ("state", "action"):
            if not isinstance(data.get(name), Mapping):
                raise DexrlError(f"missing '{name}' statistics", _STATS_HINT, where=source,
                                 code="norm-stats-invalid")
            parts[name] = _read_part(data[name], f"{source}: {name}", dim)
        return cls(**parts)


def _read_part(entry: Mapping[str, Any], where: str, dim: int) -> StatsPart:
    """Validate one stats entry and pad it to ``dim``."""
    values: dict[str, np.ndarray | None] = {}
    for field in ("mean", "std", "q01", "q99"):
        key = next((k for k in _KEY_ALIASES.get(field, (field,)) if k in entry), None)
        if key is None:
            if field in ("mean", "std"):
                raise DexrlError(f"missing '{field}'", _STATS_HINT, where=where,
                                 code="norm-stats-invalid")
            values[field] = None
            continue
        try:
            arr = np.asarray(entry[key], dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise DexrlError(f"'{key}' is not a list of numbers", _STATS_HINT, where=where,
                             code="norm-stats-invalid") from err
        if arr.ndim != 1 or not 0 < arr.size <= dim or not np.isfinite(arr).all():
            raise DexrlError(
                f"'{key}' must be a list of 1..{dim} finite numbers (got shape {list(arr.shape)})",
                _STATS_HINT, where=where,
                code="norm-stats-invalid",
            )
        values[field] = arr
    lengths = {len(v) for v in values.values() if v is not None}
    if len(lengths) != 1:
        raise DexrlError(f"statistics have different lengths {sorted(lengths)}", _STATS_HINT,
                         where=where, code="norm-stats-invalid")
    if (values["std"] < 0).any():
        raise DexrlError("'std' has negative entries", _STATS_HINT, where=where,
                         code="norm-stats-invalid")
    if (values["q01"] is None) != (values["q99"] is None):
        raise DexrlError("give both 'min' and 'max' (q01/q99) or neither", _STATS_HINT, where=where,
                         code="norm-stats-invalid")
    tensors = {}
    for field, arr in values.items():
        if arr is not None:
            arr = np.concatenate([arr, np.full(dim - len(arr), _PAD_VALUES[field])])
            arr = torch.from_numpy(arr.astype(np.float32))
        tensors[field] = arr
    return StatsPart(**tensors)


def _f32(x: torch.Tensor | np.ndarray | Sequence[float]) -> torch.Tensor:
    return torch.as_tensor(x).to(torch.float32)


def _check_mode(mode: str) -> None:
    if mode not in NORM_MODES:
        raise DexrlError(f"unknown norm_mode '{mode}'", f"use one of {', '.join(NORM_MODES)}",
                         where="norm_mode", code="norm-mode-unknown")


def _quantiles(part: StatsPart) -> tuple[torch.Tensor, torch.Tensor]:
    if part.q01 is None or part.q99 is None:
        raise DexrlError("norm_mode 'quantile' needs min/max (q01/q99) statistics",
                         "add them to norm_stats.json or use norm_mode mean_std",
                         where="norm_mode", code="norm-stats-no-quantiles")
    return part.q01, part.q99


def pad_to(x: torch.Tensor | np.ndarray, dim: int = MODEL_DIM) -> torch.Tensor:
    """Zero-pad the last dim of ``x`` to ``dim`` (float32); a longer last dim is an error."""
    x = _f32(x)
    if x.shape[-1] > dim:
        raise ValueError(f"last dim {x.shape[-1]} exceeds {dim}")
    return torch.nn.functional.pad(x, (0, dim - x.shape[-1]))


def normalize(x: torch.Tensor | np.ndarray, part: StatsPart, mode: NormMode) -> torch.Tensor:
    """Map raw values to model space: ``(x-mean)/(std+1e-6)`` or ``(x-q01)/(q99-q01+1e-6)*2-1``."""
    _check_mode(mode)
    x = _f32(x)
    if mode == "mean_std":
        return (x - part.mean.to(x.device)) / (part.std.to(x.device) + _EPS)
    lo, hi = (q.to(x.device) for q in _quantiles(part))
    return (x - lo) / (hi - lo + _EPS) * 2.0 - 1.0


def denormalize(x: torch.Tensor | np.ndarray, part: StatsPart, mode: NormMode) -> torch.Tensor:
    """Inverse of :func:`normalize`: ``x*(std+1e-6)+mean`` or ``(x+1)/2*(q99-q01+1e-6)+q01``."""
    _check_mode(mode)
    x = _f32(x)
    if mode == "mean_std":
        return x * (part.std.to(x.device) + _EPS) + part.mean.to(x.device)
    lo, hi = (q.to(x.device) for q in _quantiles(part))
    return (x + 1.0) / 2.0 * (hi - lo + _EPS) + lo


def state_to_model(
    states: torch.Tensor | np.ndarray, stats: NormStats, mode: NormMode
) -> torch.Tensor:
    """Env states [B, d<=32] -> normalized model states float32 [B, 32] (pad, then normalize)."""
    return normalize(pad_to(states, stats.state.mean.shape[-1]), stats.state, mode)


def actions_to_env(
    raw: torch.Tensor | np.ndarray,
    states: torch.Tensor | np.ndarray,
    stats: NormStats,
    mode: NormMode,
    num_chunks: int,
    env_dim: int = 7,
    non_delta_mask: Sequence[int] = (6,),
    *,
    states_normalized: bool = False,
) -> torch.Tensor:
    """Model actions [B, T, 32] -> absolute env actions float32 [B, num_chunks, env_dim].

    Denormalizes the actions, adds the padded state to every step (actions are deltas to the
    state) except on ``non_delta_mask`` dims, which keep the prediction, then slices.

    Args:
        raw: Normalized network output [B, T, 32].
        states: Raw env states [B, d<=32]; or, with ``states_normalized``, the model-space states
            [B, 32] from :func:`state_to_model`, which are denormalized first as Dexbotic does
            (equal to the raw state up to float rounding).
        stats: The checkpoint's statistics.
        mode: ``mean_std`` or ``quantile``.
        num_chunks: Leading actions to keep (<= T).
        env_dim: Action dims the env takes (<= 32).
        non_delta_mask: Dims predicted as absolute values (gripper).
        states_normalized: Whether ``states`` are already in model space.
    """
    actions = denormalize(raw, stats.action, mode)
    dim = actions.shape[-1]
    if actions.ndim != 3 or not 0 < num_chunks <= actions.shape[1] or not 0 < env_dim <= dim:
        raise ValueError(
            f"cannot take {num_chunks} steps x {env_dim} dims from actions {list(actions.shape)}"
        )
    state = denormalize(states, stats.state, mode) if states_normalized else pad_to(states, dim)
    state = state.to(actions.device)
    keep = torch.zeros(dim, dtype=torch.bool, device=actions.device)
    keep[list(non_delta_mask)] = True
    absolute = torch.where(keep, actions, actions + state[:, None, :])
    return absolute[:, :num_chunks, :env_dim].contiguous()


__all__ = [
    "MODEL_DIM",
    "NORM_MODES",
    "NormMode",
    "NormStats",
    "StatsPart",
    "actions_to_env",
    "denormalize",
    "normalize",
    "pad_to",
    "state_to_model",
]
