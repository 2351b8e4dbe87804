"""dexrl's RLinf extension module: registers dexrl's policies in every process that builds one.

RLinf's model registry is per process, and RLinf 0.3.0 imports ``$RLINF_EXT_MODULE`` and calls its
``register()`` only inside Ray workers. dexrl therefore points ``RLINF_EXT_MODULE`` at this module
(:data:`EXT_MODULE`) for the workers, and the driver calls :func:`register` itself before RLinf's
``validate_cfg`` checks ``model_type``. :mod:`dexrl.bridge.roundtrip` proves that the workers see
the same registrations.

Builders import their adapter module only when RLinf builds a model, so ``register()`` stays cheap
in every worker (the env worker never builds one).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from typing import Any

EXT_MODULE = "dexrl.bridge.registry"

# model_type -> adapter module providing ``build(cfg, torch_dtype)``.
ADAPTERS: dict[str, str] = {
    "dexbotic_pi0": "dexrl.bridge.pi0_policy",
    "dexbotic_dm0": "dexrl.bridge.dm0_policy",
}
# Registered even before its adapter exists, so a missing adapter fails loudly at build time
# instead of as "unknown model type". dexbotic_dm0 is also an RLinf built-in, which dexrl only
# replaces once its own adapter is installed.
ALWAYS_REGISTERED = frozenset({"dexbotic_pi0"})


def adapter_available(model_type: str) -> bool:
    """Whether the adapter module for ``model_type`` is installed (found without importing it)."""
    module = ADAPTERS.get(model_type)
    return module is not None and importlib.util.find_spec(module) is not None


def dexrl_model_types() -> list[str]:
    """The model types :func:`register` registers in this installation."""
    return [t for t in ADAPTERS if t in ALWAYS_REGISTERED or adapter_available(t)]


def _lazy_builder(model_type: str, module: str) -> Callable[[Any, Any], Any]:
    def build(cfg: Any, torch_dtype: Any) -> Any:
        return importlib.import_module(module).build(cfg, torch_dtype)

    build.__qualname__ = build.__name__ = f"build_{model_type}"
    build.__doc__ = f"Build RLinf model type '{model_type}' with {module}.build."
    return build


def register() -> list[str]:
    """Register dexrl's policies with RLinf in this process (RLinf calls this in every worker).

    ``import rlinf.models`` comes first: it (re-)registers RLinf's built-ins on import, and dexrl's
    entries must win, hence ``force=True`` afterwards. Also activates the CPU platform on nodes
    without an accelerator.

    Returns:
        The model types registered.
    """
    import rlinf.models

    from dexrl.bridge import cpu_platform

    cpu_platform.install()
    types = dexrl_model_types()
    for model_type in types:
        rlinf.models.register_model(
            model_type, _lazy_builder(model_type, ADAPTERS[model_type]),
            category="embodied", force=True,
        )
    return types


def registered_model_types(candidates: list[str] | None = None) -> list[str]:
    """Which of ``candidates`` (default: dexrl's) RLinf resolves as embodied models here.

    For dexrl's own types the registered builder must also be dexrl's, since RLinf ships a
    built-in ``dexbotic_dm0`` that resolves without dexrl.
    """
    import rlinf.models
    from rlinf.config import EMBODIED_MODEL, SupportedModel

    found = []
    for model_type in candidates if candidates is not None else list(ADAPTERS):
        try:
            resolved = SupportedModel(model_type)
        except NotImplementedError:
            continue
        # RLinf has no public lookup of a type's builder; the registry dict is the only source.
        builder = rlinf.models._MODEL_REGISTRY.get(model_type)
        ours = getattr(builder, "__module__", "") == __name__
        if resolved in EMBODIED_MODEL and (ours or model_type not in ADAPTERS):
            found.append(model_type)
    return found
