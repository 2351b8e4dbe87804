"""Write a π0 or DM0 checkpoint folder with random weights in Dexbotic's layout, at real size.

Run by hand, from ``bench/`` or with it on ``PYTHONPATH``::

    python3 bench/random_checkpoint.py /tmp/pi0                 # π0, real size, bf16
    python3 bench/random_checkpoint.py /tmp/dm0 --model dm0     # DM0 at its assumed real size
    python3 bench/random_checkpoint.py /tmp/pi0-tiny --tiny     # the tests' tiny π0 (a CPU check)

The real-size policies (π0 3.24 B parameters; DM0 2.56 B at the sizes ``bench/dm0_policy.py``
assumes) are the adapter benches' ``random_policy``: built on the meta device, materialized with
random weights on CUDA where there is one, their tokenizer, preprocessor config and norm stats
written into the folder; the weights are saved bf16 in ``--shards`` files beside them: what
``dexrl train --ckpt`` loads on a GPU machine with no network (bench/libero_run.py,
docs/performance.md#the-shipped-libero-run-on-a-gpu).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

WRITERS = ("pi0", "dm0")


def write_real(model: str, out: Path, shards: int) -> int:
    """Write the real-size random ``model`` into ``out``; returns its parameter count."""
    if model == "pi0":
        from pi0_policy import random_policy, real_pi0_config, real_pi0_raw

        config, raw = real_pi0_config(), real_pi0_raw()
    else:
        from dm0_policy import random_policy, real_dm0_config, real_dm0_raw

        config, raw = real_dm0_config(), real_dm0_raw()
    from dexrl.models.pi0.tiny import save_checkpoint

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    out.mkdir(parents=True, exist_ok=True)
    network = random_policy(config, torch.bfloat16, device, out).network
    count = sum(p.numel() for p in network.parameters())
    state = {k: v.detach().to("cpu") for k, v in network.state_dict().items()}
    del network
    save_checkpoint(out, raw, state, dtype=torch.bfloat16, shards=shards)
    return count


def write_tiny(model: str, out: Path, shards: int) -> None:
    """The tests' tiny random checkpoint of ``model``."""
    if model == "pi0":
        from dexrl.models.pi0.tiny import write_tiny_pi0

        write_tiny_pi0(out, shards=shards)
    else:
        from dexrl.models.dm0.tiny import write_tiny_dm0

        write_tiny_dm0(out, shards=shards)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--model", choices=WRITERS, default="pi0")
    parser.add_argument("--tiny", action="store_true", help="the tests' tiny checkpoint instead")
    parser.add_argument("--shards", type=int, default=4)
    args = parser.parse_args()
    start = time.perf_counter()
    if args.tiny:
        write_tiny(args.model, args.out, args.shards)
        print(f"wrote {args.out}: tiny {args.model}", flush=True)
        return
    count = write_real(args.model, args.out, args.shards)
    print(f"wrote {args.out}: {args.model}, {count:,} parameters, bf16, {args.shards} shards, "
          f"{time.perf_counter() - start:.1f} s", flush=True)


if __name__ == "__main__":
    main()
