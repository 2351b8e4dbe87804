"""dexrl's bridge to RLinf 0.3.0: the only package that imports ``rlinf``.

- :mod:`dexrl.bridge.registry`: the RLinf extension module (``RLINF_EXT_MODULE``) that registers
  dexrl's policies in every worker.
- :mod:`dexrl.bridge.roundtrip`: proves the workers see them (``train`` and ``doctor``).
- :mod:`dexrl.bridge.launch`: ``prepare()`` and ``launch()``, what ``train``/``resume`` call.
- :mod:`dexrl.bridge.supervise`: progress events, stall and worker-failure handling, log routing.
- :mod:`dexrl.bridge.workers`: RLinf's worker and runner classes behind thin subclasses.
- :mod:`dexrl.bridge.cpu_platform`: the CPU stand-in for RLinf's torch platform (no-GPU nodes).
- :mod:`dexrl.bridge.pi0_policy`: the π0 policy adapter.
- :mod:`dexrl.bridge.local_ppo`: RLinf's PPO iteration in one process (the learning check).

Importing this package imports nothing else; each module is imported where it is needed.
"""
