"""``dexrl eval`` logic: the request, the episode loop, statistics, results (what a checkpoint
path is, and export, live in :mod:`dexrl.checkpoints`).

Nothing here imports rlinf; a suite's envs come from its task (:class:`dexrl.vec_env.EvalTask`,
implemented in :mod:`dexrl.bridge.envs`).
"""
