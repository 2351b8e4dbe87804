"""Everything checkpoint, in one home.

- ``files/``: the files themselves, ranked low so models, runs and hub use them: the Dexbotic
  folder's file names (``layout``), safetensors headers (``headers``, no torch) and tensors
  (``weights``), a run's RLinf ``global_step_N`` folders and completion markers (``steps``).
- ``verify.py``: is a folder a usable checkpoint, and its model type (no weight loaded).
- ``sources.py``: what a path given on the command line is.
- ``policy.py``: the one loading path (:func:`~dexrl.checkpoints.policy.load_policy`,
  :func:`~dexrl.checkpoints.policy.load_eval_policy`).
- ``export.py``: RLinf training weights back into a Dexbotic checkpoint folder.

The stable Python API is :mod:`dexrl` itself (``from dexrl import load_policy``).
"""
