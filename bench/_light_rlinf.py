"""RLinf's policy modules on a bare GPU machine, where Ray is missing.

RLinf's package ``__init__`` files import Ray; the adapters need only its policy base class, its
CUDA-graph manager and its noise head. Without Ray, :func:`light_rlinf` registers RLinf's packages
as bare modules (their folders, no ``__init__`` run), so those files import directly. Call it
before anything imports ``dexrl.bridge``.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path


def light_rlinf() -> None:
    """Without Ray, load RLinf's modules without running its package ``__init__`` files."""
    if importlib.util.find_spec("ray") is not None:
        return
    spec = importlib.util.find_spec("rlinf")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("error: rlinf is not importable; hint: put RLinf's package on "
                         "PYTHONPATH (bench/README.md lists what a bare GPU machine needs)")
    root = Path(next(iter(spec.submodule_search_locations)))
    for name, folder in (("rlinf", root), ("rlinf.models", root / "models"),
                         ("rlinf.models.embodiment", root / "models" / "embodiment"),
                         ("rlinf.utils", root / "utils")):
        if name not in sys.modules:
            module = types.ModuleType(name)
            module.__path__ = [str(folder)]
            sys.modules[name] = module
