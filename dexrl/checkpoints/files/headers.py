"""Tensor-level checks of a checkpoint from its safetensors headers alone (no weight is loaded).

A safetensors file is an 8-byte little-endian header length, a JSON header naming every tensor's
dtype, shape and byte range, then the data. Reading only the header tells names, shapes, dtypes and
parameter counts, and comparing the byte ranges with the file size catches truncated downloads.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dexrl.errors import Finding

# Bytes per element of every safetensors dtype.
_DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "I16": 2, "U16": 2,
                "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}
_MAX_HEADER = 100 * 1024 * 1024  # the safetensors format's own limit
_REDOWNLOAD = "download it again (`dexrl download REPO --force`)"


@dataclass(frozen=True)
class TensorInfo:
    """One tensor as a safetensors header describes it."""

    dtype: str
    shape: tuple[int, ...]
    file: str

    @property
    def numel(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)


@dataclass
class WeightStats:
    """What the weight files hold, for the download summary.

    Attributes:
        tensors: Name -> header entry, over all files.
        files: Number of safetensors files.
        dtype_elements: safetensors dtype -> number of elements stored in it.
    """

    tensors: dict[str, TensorInfo] = field(default_factory=dict)
    files: int = 0
    dtype_elements: Counter[str] = field(default_factory=Counter)

    @property
    def parameters(self) -> int:
        """Total elements over every tensor in the files."""
        return sum(self.dtype_elements.values())


class HeaderError(ValueError):
    """A safetensors file whose header is unreadable or disagrees with the file size."""


def read_header(path: Path) -> dict[str, TensorInfo]:
    """Parse the header of the safetensors file ``path`` and check it covers the file exactly.

    Raises:
        HeaderError: unreadable header, unknown dtype, inconsistent byte ranges, or a file size
            other than the header promises (a truncated or padded download).
    """
    path = Path(path)
    size = path.stat().st_size
    with path.open("rb") as handle:
        prefix = handle.read(8)
        if len(prefix) < 8:
            raise HeaderError(f"only {size} bytes: not a safetensors file")
        length = int.from_bytes(prefix, "little")
        if length > min(_MAX_HEADER, size - 8):
            raise HeaderError(f"header length {length} does not fit the {size}-byte file")
        try:
            header = json.loads(handle.read(length))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise HeaderError(f"header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise HeaderError("header is not a JSON object")
    tensors, end = {}, 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        tensors[name] = info = _entry(name, entry, path.name)
        start, stop = entry["data_offsets"]
        if stop - start != info.numel * _DTYPE_BYTES[info.dtype]:
            raise HeaderError(f"{name}: byte range {start}-{stop} does not fit {info.dtype} "
                              f"{list(info.shape)}")
        end = max(end, stop)
    if size != 8 + length + end:
        raise HeaderError(f"file has {size} bytes but its header describes {8 + length + end} "
                          "(truncated or corrupt)")
    return tensors


def _entry(name: str, entry: Any, file: str) -> TensorInfo:
    try:
        dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
        valid = (dtype in _DTYPE_BYTES and all(isinstance(d, int) and d >= 0 for d in shape)
                 and len(offsets) == 2 and all(isinstance(o, int) for o in offsets)
                 and 0 <= offsets[0] <= offsets[1])
    except (TypeError, KeyError):
        valid = False
    if not valid:
        raise HeaderError(f"malformed header entry for {name!r}: {entry!r}"[:200])
    return TensorInfo(dtype, tuple(shape), file)


def read_weights(files: list[Path], index: Path | None = None) -> tuple[WeightStats, list[Finding]]:
    """Read every header of ``files``; with a shard index, check it names each tensor's file."""
    stats, findings = WeightStats(), []
    for path in files:
        if not path.is_file():
            continue  # check_checkpoint_dir reports missing shards
        try:
            tensors = read_header(path)
        except (HeaderError, OSError) as exc:
            findings.append(Finding("error", str(path), f"unreadable weights: {exc}", _REDOWNLOAD,
                                    code="model-weights-unreadable"))
            continue
        stats.files += 1
        for name, info in tensors.items():
            if name in stats.tensors:
                findings.append(Finding("error", str(path), f"tensor {name!r} is also in "
                                        f"{stats.tensors[name].file}", _REDOWNLOAD,
                                        code="model-weights-overlap"))
            stats.tensors[name] = info
            stats.dtype_elements[info.dtype] += info.numel
    if index is not None and index.is_file() and not findings:
        findings += _index_findings(index, stats.tensors)
    return stats, findings


def _index_findings(index: Path, tensors: dict[str, TensorInfo]) -> list[Finding]:
    try:
        weight_map = dict(json.loads(index.read_text())["weight_map"])
    except (OSError, ValueError, KeyError, TypeError):
        return []  # check_checkpoint_dir already reports an unreadable index
    wrong = sorted(k for k, f in weight_map.items() if k not in tensors or tensors[k].file != f)
    unlisted = sorted(set(tensors) - set(weight_map))
    found = []
    if wrong:
        found.append(Finding("error", str(index), f"{len(wrong)} tensor(s) not in the shard the "
                             f"index names: {_preview(wrong)}", _REDOWNLOAD,
                             code="model-weights-index-wrong-shard"))
    if unlisted:
        found.append(Finding("error", str(index), f"{len(unlisted)} tensor(s) missing from the "
                             f"index: {_preview(unlisted)}", _REDOWNLOAD,
                             code="model-weights-index-incomplete"))
    return found


def _preview(keys: list[str], shown: int = 3) -> str:
    more = len(keys) - shown
    return ", ".join(keys[:shown]) + (f", ... and {more} more" if more > 0 else "")
