"""The packages a dexrl run depends on and their installed versions: one list for ``dexrl
doctor``'s stack check, the run and eval manifests and the Ray workers' environment comparison.
"""

from __future__ import annotations

import platform
from importlib import metadata

# What users call a package -> its distribution name.
PACKAGES: dict[str, str] = {
    "dexrl": "dexrl",
    "torch": "torch",
    "rlinf": "rlinf",
    "ray": "ray",
    "transformers": "transformers",
    "huggingface-hub": "huggingface-hub",
    "hydra-core": "hydra-core",
    "omegaconf": "omegaconf",
    "mujoco": "mujoco",
    "robosuite": "robosuite",
    "libero": "rlinf-libero",
    "numpy": "numpy",
    "pyarrow": "pyarrow",
}


def installed_versions() -> dict[str, str | None]:
    """Display name -> installed version (``None``: not installed), ``python`` first.

    Read from installed metadata, never by importing, so it is fast and cannot crash.
    """
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name, dist in PACKAGES.items():
        try:
            versions[name] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions
