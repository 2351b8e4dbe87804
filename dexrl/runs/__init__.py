"""The run folder: the one owner of its layout and of everything written into it.

``layout`` names the files, ``record`` writes ``config.yaml``/``manifest.json``, ``opened``
finds and reads a folder and re-anchors its paths after a move, ``checkpoints`` finds RLinf's
``global_step_N`` folders, ``state`` keeps the driver's record, ``divergence`` judges a step's
metrics, and ``durable`` is the one durable writer. Which config keys dexrl owns, what a resume
may change and which keys hold a run's paths are the config package's
(:mod:`dexrl.config.owned_keys`, :mod:`dexrl.config.resume_rules`, :mod:`dexrl.config.run_paths`).
"""
