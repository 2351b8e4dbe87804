"""dexrl's RLinf extension module: registers dexrl's policies in every process that builds one.

Design notes: docs/design/policy-adapters.md.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from typing import Any

from dexrl.catalog import POLICIES, load_reference, policies

EXT_MODULE = "dexrl.bridge.registry"

# model_type -> adapter module providing ``build(cfg, torch_dtype)``, for dexrl's own policies
# (derived from the catalog; plugins are added by :func:`builders`).
ADAPTERS: dict[str, str] = {p.model_type: p.builder.split(":")[0] for p in POLICIES.values()}
# Registered even before its adapter exists, so a missing adapter fails loudly at build time
# instead of as "unknown model type". dexbotic_dm0 is also an RLinf built-in, which dexrl only
# replaces once its own adapter is installed.
ALWAYS_REGISTERED = frozenset(p.model_type for p in POLICIES.values() if p.always_register)


def adapter_available(model_type: str) -> bool:
    """Whether the adapter module for ``model_type`` is installed (found without importing it)."""
    module = ADAPTERS.get(model_type)
    return module is not None and importlib.util.find_spec(module) is not None


def dexrl_model_types() -> list[str]:
    """The built-in model types :func:`register` registers in this installation."""
    return [t for t in ADAPTERS if t in ALWAYS_REGISTERED or adapter_available(t)]


def builders() -> dict[str, str]:
    """model_type -> ``"module:function"`` of every policy :func:`register` registers.

    The built-ins (those installed) and every valid plugin; a broken plugin is left out (and
    reported by :mod:`dexrl.plugins`), so it never stops the others from registering.
    """
    installed = set(dexrl_model_types())
    return {p.model_type: p.builder for p in policies().values()
            if not p.builtin or p.model_type in installed}


def _lazy_builder(model_type: str, target: str) -> Callable[[Any, Any], Any]:
    module, _, function = target.partition(":")

    def build(cfg: Any, torch_dtype: Any) -> Any:
        return load_reference(f"{module}:{function or 'build'}")(cfg, torch_dtype)

    build.__qualname__ = build.__name__ = f"build_{model_type}"
    build.__doc__ = f"Build RLinf model type '{model_type}' with {target}."
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
    targets = builders()
    for model_type, target in targets.items():
        rlinf.models.register_model(
            model_type, _lazy_builder(model_type, target), category="embodied", force=True,
        )
    return list(targets)


def registered_model_types(candidates: list[str] | None = None) -> list[str]:
    """Which of ``candidates`` (default: dexrl's) RLinf resolves as embodied models here.

    For dexrl's own types the registered builder must also be dexrl's, since RLinf ships a
    built-in ``dexbotic_dm0`` that resolves without dexrl.
    """
    import rlinf.models
    from rlinf.config import EMBODIED_MODEL, SupportedModel

    found = []
    for model_type in candidates if candidates is not None else list(builders()):
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
