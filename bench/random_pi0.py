"""Write a π0 checkpoint folder with random weights in Dexbotic's layout, at π0's real sizes.

Run by hand, from ``bench/`` or with it on ``PYTHONPATH``::

    python3 bench/random_pi0.py /tmp/pi0-real            # real size, bf16 (on CUDA when there)
    python3 bench/random_pi0.py /tmp/pi0-tiny --tiny     # the tests' tiny π0 (a CPU check)

The real-size policy (3.24 B parameters) is the adapter benches' ``random_policy``: built on
the meta device, materialized with random weights on CUDA where there is one, its sentencepiece
tokenizer, preprocessor config and norm stats written into the folder; its weights are saved
bf16 in ``--shards`` files beside them: what ``dexrl train --ckpt`` loads on a GPU machine with
no network (bench/modes.py's GPU call, docs/execution-modes.md#on-a-gpu).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from pi0_policy import random_policy, real_pi0_config, real_pi0_raw

from dexrl.models.pi0.tiny import save_checkpoint, write_tiny_pi0


def write_real_pi0(out: Path, shards: int) -> int:
    """Write the real-size random π0 into ``out``; returns its parameter count."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    out.mkdir(parents=True, exist_ok=True)
    network = random_policy(real_pi0_config(), torch.bfloat16, device, out).network
    count = sum(p.numel() for p in network.parameters())
    state = {k: v.detach().to("cpu") for k, v in network.state_dict().items()}
    del network
    save_checkpoint(out, real_pi0_raw(), state, dtype=torch.bfloat16, shards=shards)
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--tiny", action="store_true", help="the tests' tiny π0 instead")
    parser.add_argument("--shards", type=int, default=4)
    args = parser.parse_args()
    start = time.perf_counter()
    if args.tiny:
        write_tiny_pi0(args.out, shards=args.shards)
        print(f"wrote {args.out}: tiny π0", flush=True)
        return
    count = write_real_pi0(args.out, args.shards)
    print(f"wrote {args.out}: {count:,} parameters, bf16, {args.shards} shards, "
          f"{time.perf_counter() - start:.1f} s", flush=True)


if __name__ == "__main__":
    main()
