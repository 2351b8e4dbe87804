"""The files of checkpoints, below every unit that reads or writes them: a Dexbotic folder's file
names (layout.py), its safetensors headers (headers.py, no torch) and tensors (weights.py), and
a run's RLinf ``global_step_N`` folders with their completion markers (steps.py).

Ranked on its own in the layering (low), so models, runs and hub use it without reaching up to
the rest of :mod:`dexrl.checkpoints`.
"""
