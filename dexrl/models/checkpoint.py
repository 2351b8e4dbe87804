"""Reading checkpoint directories: JSON, single or sharded safetensors, strict key accounting."""

from __future__ import annotations

import fnmatch
import itertools
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import torch
from safetensors import SafetensorError, safe_open
from torch import nn

from dexrl.errors import DexrlError

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
# The checkpoint's compute dtype: RLinf casts the whole model to the dtype of this weight.
DTYPE_REFERENCE_KEY = "model.llm.layers.0.self_attn.q_proj.weight"
_SHOWN_KEYS = 5  # how many offending keys an error message lists before the count


def read_json(path: Path, *, what: str) -> dict[str, Any]:
    """Read a JSON object from ``path``; ``what`` names the file's role in error hints."""
    if not path.is_file():
        raise DexrlError(
            f"missing {what}",
            hint=f"the checkpoint directory must contain {path.name}; copy it from the original "
            "checkpoint or point --model at the right directory",
            where=str(path),
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DexrlError(
            f"cannot parse {what}: {exc}",
            hint="the file is corrupt; restore it from the original checkpoint",
            where=str(path),
        ) from exc
    if not isinstance(data, dict):
        raise DexrlError(
            f"{what} must hold a JSON object, found {type(data).__name__}",
            hint="restore the file from the original checkpoint",
            where=str(path),
        )
    return data


def weight_files(ckpt_dir: Path) -> list[Path]:
    """Return a checkpoint's safetensors files: the shards the index names, or the single file."""
    index = ckpt_dir / INDEX_FILE
    if index.is_file():
        weight_map = read_json(index, what="safetensors index").get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise DexrlError(
                "safetensors index has no 'weight_map'",
                hint="restore model.safetensors.index.json from the original checkpoint",
                where=str(index),
            )
        files = [ckpt_dir / name for name in sorted(set(weight_map.values()))]
        missing = [f.name for f in files if not f.is_file()]
        if missing:
            raise DexrlError(
                f"shards named by the index are missing: {_preview(missing)}",
                hint="download the missing shard files into the checkpoint directory",
                where=str(index),
            )
        return files
    if (ckpt_dir / SINGLE_FILE).is_file():
        return [ckpt_dir / SINGLE_FILE]
    found = sorted(ckpt_dir.glob("*.safetensors"))
    if found:
        return found
    raise DexrlError(
        "no weights found (neither model.safetensors nor model.safetensors.index.json)",
        hint="point at a directory holding the Dexbotic checkpoint's safetensors files",
        where=str(ckpt_dir),
    )


def read_state_dict(
    files: Sequence[Path], *, device: str | torch.device = "cpu", dtype: torch.dtype | None = None
) -> tuple[dict[str, torch.Tensor], dict[str, Path]]:
    """Read every tensor of ``files``; floating tensors are cast to ``dtype`` when given.

    Returns:
        The state dict and, for error messages, the file each key came from.
    """
    tensors: dict[str, torch.Tensor] = {}
    origin: dict[str, Path] = {}
    for path in files:
        try:
            with safe_open(str(path), framework="pt", device=str(device)) as handle:
                for key in handle.keys():  # noqa: SIM118 - safe_open is not a Mapping
                    if key in tensors:
                        raise DexrlError(
                            f"tensor {key!r} is in two files ({origin[key].name}, {path.name})",
                            hint="the shards overlap; restore the checkpoint's safetensors files",
                            where=str(path),
                        )
                    tensor = handle.get_tensor(key)
                    if dtype is not None and tensor.is_floating_point():
                        tensor = tensor.to(dtype)
                    tensors[key] = tensor
                    origin[key] = path
        except (SafetensorError, OSError, ValueError) as exc:
            raise DexrlError(
                f"cannot read safetensors file: {exc}",
                hint="the file is corrupt or truncated; download it again",
                where=str(path),
            ) from exc
    return tensors, origin


def load_strict(
    module: nn.Module,
    state_dict: Mapping[str, torch.Tensor],
    *,
    allowed_extra: Iterable[str] = (),
    source: str,
) -> list[str]:
    """Load ``state_dict`` into ``module`` by assignment after checking every key both ways.

    Every module entry must be present with the same shape; every checkpoint key must be consumed
    or match one of the ``allowed_extra`` glob patterns. Tensors are assigned, not copied, so a
    module built on the meta device gets the checkpoint's storage and dtype.

    Returns:
        The checkpoint keys that were skipped because they are allowed extras.
    """
    expected = module.state_dict(keep_vars=True)
    missing = sorted(k for k in expected if k not in state_dict)
    extra = sorted(k for k in state_dict if k not in expected)
    unexpected = [k for k in extra if not any(fnmatch.fnmatchcase(k, p) for p in allowed_extra)]
    mismatched = sorted(
        f"{k} (checkpoint {tuple(state_dict[k].shape)}, model {tuple(v.shape)})"
        for k, v in expected.items()
        if k in state_dict and state_dict[k].shape != v.shape
    )
    problems = [
        ("model weights missing from the checkpoint", missing),
        ("unexpected checkpoint weights", unexpected),
        ("weights with the wrong shape", mismatched),
    ]
    details = [f"{label} ({len(keys)}): {_preview(keys)}" for label, keys in problems if keys]
    if details:
        raise DexrlError(
            "checkpoint weights do not match the model built from config.json",
            hint="check that config.json belongs to these safetensors files (same model type, "
            "sizes and mm_projector_type)",
            where=source,
            details=details,
        )
    module.load_state_dict({k: state_dict[k] for k in expected}, strict=True, assign=True)
    return [k for k in extra if k not in unexpected]


def checkpoint_dtype(state: Mapping[str, torch.Tensor]) -> torch.dtype:
    """The compute dtype of a checkpoint: that of its first LLM layer (files may mix dtypes)."""
    if DTYPE_REFERENCE_KEY in state:
        return state[DTYPE_REFERENCE_KEY].dtype
    floating = (t.dtype for t in state.values() if t.is_floating_point())
    return next(floating, torch.float32)


NetworkT = TypeVar("NetworkT", bound=nn.Module)


def build_and_load(
    build: Callable[[], NetworkT],
    state: Mapping[str, torch.Tensor],
    files: Sequence[Path],
    *,
    allowed_extra: Iterable[str],
    device: str | torch.device,
) -> NetworkT:
    """Build a network on the meta device, assign ``state`` key for key, return it in eval mode.

    ``build()`` must return a module with ``init_buffers(device)``, which recreates the
    non-persistent buffers the checkpoint does not hold.

    Raises:
        DexrlError: missing, unexpected or mis-shaped weights (see :func:`load_strict`).
    """
    with torch.device("meta"):
        network = build()
    source = str(files[0].parent / INDEX_FILE) if len(files) > 1 else str(files[0])
    load_strict(network, state, allowed_extra=allowed_extra, source=source)
    network.init_buffers(torch.device(device))
    leftover = [
        n
        for n, t in itertools.chain(network.named_parameters(), network.named_buffers())
        if t.is_meta
    ]
    if leftover:  # a module gained a non-persistent buffer that init_buffers does not rebuild
        raise RuntimeError(f"tensors left on the meta device after loading: {leftover}")
    return network.eval()


def _preview(keys: Sequence[str]) -> str:
    shown = ", ".join(keys[:_SHOWN_KEYS])
    more = len(keys) - _SHOWN_KEYS
    return f"{shown}, ... and {more} more" if more > 0 else shown
