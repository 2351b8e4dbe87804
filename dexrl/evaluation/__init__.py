"""``dexrl eval`` and ``dexrl export`` logic: checkpoints, the episode loop, statistics, results.

Nothing here imports rlinf; the LIBERO environment comes from :mod:`dexrl.bridge.envs.libero`.
"""
