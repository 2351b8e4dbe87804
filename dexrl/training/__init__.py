"""One training session for ``train`` and ``resume``: ``session`` (prepare, start, run, resume),
``plan`` (what a launch will do, ``--dry-run``) and ``progress`` (the per-step lines)."""
