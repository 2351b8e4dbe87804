"""What the completion marker's checksums cost, against the save they follow, in the same run.

Run by hand: ``.venv/bin/python bench/marker_checksum.py [--mib 1024] [--rounds 3] [--dir D]``.
Each round writes one file of ``--mib`` MiB with ``torch.save`` and fsyncs it (what RLinf's save
and ``mark_complete``'s sync do), then reads it back through each candidate checksum, then times
a CPU-bound loop alone and beside xxh3_64 hashing in a thread (how much marking off the training
thread takes from it: the GIL). Prints medians and ratios to the save; then the real-size π0
estimate (its checkpoint is 4·params + 4·params + 8·trainable bytes, training/plan.py).
Target: xxh3_64 ≤ 0.25 × the save's time, and hashing beside the loop slows it ≤ 10 %.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import tempfile
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import torch
import xxhash

from dexrl.checkpoints.files.proof import CHUNK_BYTES, checksum

PI0_PARAMS = 3.3e9  # π0 (PaliGemma 3B + action expert), all trained in a full fine-tune
GB = 1e9


def read_with(path: Path, make: Callable[[], object]) -> None:
    """Read ``path`` through a hashlib-like object made by ``make``."""
    digest = make()
    with open(path, "rb", buffering=0) as f:
        while chunk := f.read(CHUNK_BYTES):
            digest.update(chunk)  # type: ignore[attr-defined]


def crc32(path: Path) -> None:
    value = 0
    with open(path, "rb", buffering=0) as f:
        while chunk := f.read(CHUNK_BYTES):
            value = zlib.crc32(chunk, value)


def save(path: Path, mib: int) -> float:
    """Seconds of a torch.save of ``mib`` MiB of float32, fsynced."""
    tensor = torch.randn(mib * (1 << 20) // 4)
    start = time.perf_counter()
    torch.save({"weights": tensor}, path)
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    return time.perf_counter() - start


def busy_loop(n: int = 3_000_000) -> float:
    """Seconds of a pure-Python loop (holds the GIL, like RLinf's driver code)."""
    start = time.perf_counter()
    total = 0
    for i in range(n):
        total += i & 7
    return time.perf_counter() - start


def beside_hashing(path: Path) -> float:
    """Seconds of :func:`busy_loop` while another thread hashes ``path`` again and again."""
    stop = threading.Event()

    def hash_forever() -> None:
        while not stop.is_set():
            checksum(path)

    thread = threading.Thread(target=hash_forever)
    thread.start()
    try:
        return busy_loop()
    finally:
        stop.set()
        thread.join()


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: tmp)")
    args = parser.parse_args()
    hashes: dict[str, Callable[[Path], object]] = {
        "xxh3_64": checksum,
        "xxh3_128": lambda p: read_with(p, xxhash.xxh3_128),
        "crc32": crc32,
        "sha256": lambda p: read_with(p, hashlib.sha256),
    }
    times: dict[str, list[float]] = {"save": [], **{k: [] for k in hashes},
                                     "loop alone": [], "loop beside xxh3_64": []}
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        path = Path(tmp) / "full_weights.pt"
        for _ in range(args.rounds):
            times["save"].append(save(path, args.mib))
            for name, fn in hashes.items():
                times[name].append(timed(lambda fn=fn: fn(path)))
            times["loop alone"].append(busy_loop())
            times["loop beside xxh3_64"].append(beside_hashing(path))
            path.unlink()
    med = {k: statistics.median(v) for k, v in times.items()}
    size = args.mib * (1 << 20)
    print(f"{args.mib} MiB, median of {args.rounds} round(s), cpus={os.cpu_count()}")
    for name in ("save", *hashes):
        print(f"  {name:<10} {med[name]:7.3f} s  {size / med[name] / GB:6.2f} GB/s  "
              f"{med[name] / med['save']:5.2f} × save")
    slowdown = med["loop beside xxh3_64"] / med["loop alone"]
    print(f"  a GIL-bound loop beside xxh3_64 hashing: {slowdown:.2f} × its time alone")
    ckpt = (4 * PI0_PARAMS + 4 * PI0_PARAMS + 8 * PI0_PARAMS) / GB
    rate = size / med["xxh3_64"] / GB
    print(f"π0 full fine-tune checkpoint ≈ {ckpt:.0f} GB: xxh3_64 ≈ {ckpt / rate:.0f} s at "
          f"{rate:.2f} GB/s, the save ≈ {ckpt / (size / med['save'] / GB):.0f} s at this disk's "
          "write rate (both off RLinf's loop: marking runs in its own thread)")


if __name__ == "__main__":
    main()
