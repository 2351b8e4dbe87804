"""The frozen prefix's key/value cache of each training sample, kept for one global step.

Design notes: docs/design/policy-adapters.md and docs/performance.md.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from dexrl.errors import DexrlError
from dexrl.models.flow.mot import PrefixCache

GB = 1e9
# The device tier also stops where storing would leave less than this share of the GPU free (as
# the driver reports it, so other processes on the GPU count), so a budget above what the GPU can
# hold spills to the host or to recomputation instead of running out of memory.
DEVICE_RESERVE = 0.1
# Ids of one process continue one counter from a random 62-bit start, so ids of different rollout
# processes (and of a restarted one) do not meet in one training batch; torch's generators are
# left alone, so sampling draws the same noise with and without ids.
_IDS = itertools.count(secrets.randbits(62))
_MAX_ID = 2**63


def new_sample_ids(batch: int) -> torch.Tensor:
    """``batch`` fresh sample ids, long [batch] (an integer tensor: FSDP casts no integers)."""
    return torch.tensor([next(_IDS) % _MAX_ID for _ in range(batch)], dtype=torch.long)


@dataclass(frozen=True)
class PrefixCacheSettings:
    """``actor.model.dexbotic.prefix_cache``: budgets in GB per actor rank (0 and 0: recompute).

    Attributes:
        device_gb: Prefix caches kept on the model's device (the GPU).
        host_gb: Further caches kept in host memory (pinned when CUDA is present), copied to the
            device per micro-batch.
    """

    device_gb: float = 32.0
    host_gb: float = 0.0

    @classmethod
    def from_model_cfg(cls, cfg: Mapping[str, Any]) -> PrefixCacheSettings:
        """Read ``dexbotic.prefix_cache`` of RLinf's ``actor.model`` config (absent: defaults).

        Raises:
            DexrlError: a budget that is not a number >= 0.
        """
        section = (cfg.get("dexbotic", None) or {}).get("prefix_cache", None) or {}
        values = {}
        for key in ("device_gb", "host_gb"):
            value = section.get(key, getattr(cls, key))
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise DexrlError(f"prefix_cache.{key} is {value!r}, expected a number >= 0",
                                 hint="give the budget in GB; 0 for both recomputes the prefix "
                                 "at every use", where=f"actor.model.dexbotic.prefix_cache.{key}",
                                 code="policy-prefix-cache-budget")
            values[key] = float(value)
        return cls(**values)

    @property
    def enabled(self) -> bool:
        """Whether any budget is open."""
        return self.device_gb > 0 or self.host_gb > 0


@dataclass
class _Block:
    """Caches of consecutive rows computed together, as stored (device or host tensors)."""

    cache: PrefixCache
    host: bool


def _rows_bytes(cache: PrefixCache) -> int:
    """Bytes of one row of a cache (keys and values of every layer, masks)."""
    tensors = [*cache.keys, *cache.values, cache.valid, cache.ar]
    return sum(t[0].numel() * t.element_size() for t in tensors)


def _map(cache: PrefixCache, fn: Callable[[torch.Tensor], torch.Tensor]) -> PrefixCache:
    return PrefixCache([fn(k) for k in cache.keys], [fn(v) for v in cache.values],
                       fn(cache.valid), fn(cache.ar))


def _to_host(tensor: torch.Tensor) -> torch.Tensor:
    """A host copy; from a GPU into pinned memory without a sync (the copy back to the device
    later runs on the same stream, after this one)."""
    if not tensor.is_cuda:
        return tensor.to("cpu", copy=True)
    host = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
    return host.copy_(tensor, non_blocking=True)


class PrefixStore:
    """Per-sample prefix caches of one global step, within the budgets of ``settings``.

    Attributes:
        computed_rows: Rows that went through the prefix since construction.
        reused_rows: Rows served from the store since construction.
    """

    def __init__(self, settings: PrefixCacheSettings) -> None:
        self.settings = settings
        self.step: int | None = None
        self.computed_rows = 0
        self.reused_rows = 0
        self._entries: dict[int, tuple[_Block, int]] = {}
        self._bytes = {False: 0, True: 0}  # host? -> bytes held

    def begin_step(self, step: int) -> None:
        """Empty the store when ``step`` is not the global step it holds caches of."""
        if step != self.step:
            self.clear()
            self.step = step

    def clear(self) -> None:
        """Drop every cache (a new global step, the end of a round, or new weights)."""
        self._entries.clear()
        self._bytes = {False: 0, True: 0}

    def __len__(self) -> int:
        return len(self._entries)

    def prefix(
        self, ids: Sequence[int], encode: Callable[[torch.Tensor], PrefixCache],
        device: torch.device,
    ) -> PrefixCache:
        """The caches of rows ``ids`` in order: stored ones reused, the others computed by
        ``encode(rows)`` (long row indices into this batch) and stored while budget is left."""
        missing = [row for row, key in enumerate(ids) if key not in self._entries]
        sources: dict[int, tuple[_Block, int]] = {}
        if missing:
            fresh = encode(torch.tensor(missing, dtype=torch.long))
            fresh_block = _Block(fresh, host=False)
            self._store([ids[row] for row in missing], fresh)
            sources = {row: (fresh_block, i) for i, row in enumerate(missing)}
        self.computed_rows += len(missing)
        self.reused_rows += len(ids) - len(missing)
        located = [sources.get(row) or self._entries[key] for row, key in enumerate(ids)]
        return _assemble(located, device)

    def _store(self, ids: Sequence[int], cache: PrefixCache) -> None:
        """Keep rows of ``cache`` on the device, else on the host, while the budgets last."""
        row_bytes = _rows_bytes(cache)
        start = 0
        for host, budget in ((False, self.settings.device_gb), (True, self.settings.host_gb)):
            room_bytes = budget * GB - self._bytes[host]
            if not host:
                room_bytes = min(room_bytes, device_room(cache.valid.device))
            remaining = len(ids) - start
            count = remaining if room_bytes >= remaining * row_bytes else \
                max(0, int(room_bytes // row_bytes))  # (an infinite budget takes the first branch)
            if count == 0:
                continue
            part = cache if (start, count) == (0, len(ids)) else \
                _map(cache, lambda t, s=start, n=count: t[s:s + n].clone())
            block = _Block(_map(part, _to_host) if host else part, host)
            for i in range(count):
                self._entries[ids[start + i]] = (block, i)
            self._bytes[host] += count * row_bytes
            start += count


def device_room(device: torch.device) -> float:
    """Bytes the device tier may still take on ``device``: unlimited off CUDA, else the free
    memory above :data:`DEVICE_RESERVE` of the GPU."""
    if device.type != "cuda":
        return float("inf")
    free, total = torch.cuda.mem_get_info(device)
    return max(0.0, free - DEVICE_RESERVE * total)


def release_prefix_cache(model: Any) -> None:
    """Call the policy's ``release_prefix_cache``, through an FSDP1 wrapper (``module``), when it
    has one (dexrl's flow adapters do; a plugin policy may not)."""
    release = getattr(getattr(model, "module", model), "release_prefix_cache", None)
    if release is not None:
        release()


def _assemble(located: Sequence[tuple[_Block, int]], device: torch.device) -> PrefixCache:
    """One batch cache from (block, row) pairs; a whole block in order is used as is."""
    first = located[0][0]
    whole = all(block is first and row == i for i, (block, row) in enumerate(located))
    if whole and len(located) == first.cache.valid.shape[0]:
        cache = first.cache
        return _map(cache, lambda t: t.to(device, non_blocking=True)) if first.host else cache
    groups: dict[int, tuple[_Block, list[int], list[int]]] = {}
    for position, (block, row) in enumerate(located):
        _, rows, positions = groups.setdefault(id(block), (block, [], []))
        rows.append(row)
        positions.append(position)
    parts = []
    order: list[int] = []
    for block, rows, positions in groups.values():
        index = torch.tensor(rows, dtype=torch.long, device=block.cache.valid.device)
        parts.append(_map(block.cache, lambda t, i=index: t.index_select(0, i).to(
            device, non_blocking=True)))
        order.extend(positions)
    inverse = torch.empty(len(order), dtype=torch.long)
    inverse[torch.tensor(order, dtype=torch.long)] = torch.arange(len(order))
    inverse = inverse.to(device)

    def join(tensors: list[torch.Tensor]) -> torch.Tensor:
        joined = torch.cat(tensors) if len(tensors) > 1 else tensors[0]
        return joined.index_select(0, inverse)

    layers = range(len(parts[0].keys))
    return PrefixCache([join([p.keys[i] for p in parts]) for i in layers],
                       [join([p.values[i] for p in parts]) for i in layers],
                       join([p.valid for p in parts]), join([p.ar for p in parts]))


__all__ = ["PrefixCacheSettings", "PrefixStore", "new_sample_ids", "release_prefix_cache"]
