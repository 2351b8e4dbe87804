"""Reading checkpoint weights: single or sharded safetensors into tensors, strict key accounting
(the folder's files themselves: :mod:`dexrl.checkpoints.files.layout`)."""

from __future__ import annotations

import fnmatch
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

import torch
from safetensors import SafetensorError, safe_open
from torch import nn

from dexrl.checkpoints.files.layout import INDEX_FILE, preview
from dexrl.errors import DexrlError

# The checkpoint's compute dtype: RLinf casts the whole model to the dtype of this weight.
DTYPE_REFERENCE_KEY = "model.llm.layers.0.self_attn.q_proj.weight"


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
                            code="model-weights-overlap",
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
                code="model-weights-unreadable",
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
    details = [f"{label} ({len(keys)}): {preview(keys)}" for label, keys in problems if keys]
    if details:
        raise DexrlError(
            "checkpoint weights do not match the model built from config.json",
            hint="check that config.json belongs to these safetensors files (same model type, "
            "sizes and mm_projector_type)",
            where=source,
            details=details,
            code="model-weights-mismatch",
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
