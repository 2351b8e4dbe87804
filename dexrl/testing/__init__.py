"""Tiny checkpoints in the real Dexbotic layout, for ``--smoke`` and the benchmarks:
``tiny_pi0.write_tiny_pi0``, ``dm0.write_tiny_dm0`` and their files (``files``). Helpers only
the tests use live in ``tests/``."""
