"""Checkpoints as dexrl meets them: what a path given on the command line is (sources.py),
loading its policy (policy.py, loading.py), and turning RLinf training weights into a Dexbotic
checkpoint folder (export.py)."""
