"""``dexrl eval`` logic: the request, the episode loop, statistics, results (what a checkpoint
path is, and export, live in :mod:`dexrl.checkpoints`).

Nothing here imports rlinf; the LIBERO environment comes from :mod:`dexrl.bridge.envs.libero`.
"""
