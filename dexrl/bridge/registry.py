"""dexrl's RLinf extension module: registers dexrl's policies in every process that builds one.

Design notes: docs/design/policy-adapters.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dexrl.catalog import load_reference, policies

EXT_MODULE = "dexrl.bridge.registry"


def _build_pi0(cfg: Any, torch_dtype: Any) -> Any:
    from dexrl.bridge.policies.pi0 import build

    return build(cfg, torch_dtype)


def _build_dm0(cfg: Any, torch_dtype: Any) -> Any:
    from dexrl.bridge.policies.dm0 import build

    return build(cfg, torch_dtype)


# model_type -> ``build(cfg, torch_dtype)`` of dexrl's own policies (each imports its adapter when
# called); plugins are added by :func:`builders`. dexbotic_dm0 is also an RLinf built-in, which
# dexrl's entry replaces.
ADAPTERS: dict[str, Callable[[Any, Any], Any]] = {
    "dexbotic_pi0": _build_pi0, "dexbotic_dm0": _build_dm0,
}


# model_type -> the adapter class of dexrl's own policies, as ``"module:Class"`` (imported when
# used): ``dexrl eval --torch-compile/--cuda-graph`` borrows its rollout call.
ADAPTER_CLASSES: dict[str, str] = {
    "dexbotic_pi0": "dexrl.bridge.policies.pi0:Pi0RLPolicy",
    "dexbotic_dm0": "dexrl.bridge.policies.dm0:Dm0RLPolicy",
}


def has_fast_path(model_type: str) -> bool:
    """Whether evaluations of ``model_type`` can use the compiled / graphed rollout call."""
    return model_type in ADAPTER_CLASSES


def builders() -> dict[str, Callable[[Any, Any], Any]]:
    """model_type -> builder of every policy :func:`register` registers.

    The built-ins (those with an adapter) and every valid plugin; a broken plugin is left out (and
    reported by :mod:`dexrl.plugins`), so it never stops the others from registering.
    """
    found: dict[str, Callable[[Any, Any], Any]] = {}
    for p in policies().values():
        if p.builtin and p.model_type in ADAPTERS:
            found[p.model_type] = ADAPTERS[p.model_type]
        elif not p.builtin and p.builder is not None:
            found[p.model_type] = _lazy_builder(p.model_type, p.builder)
    return found


def _lazy_builder(model_type: str, target: str | Callable[[], Any]) -> Callable[[Any, Any], Any]:
    """A plugin's builder, imported from its ``"module:function"`` when first called."""

    def build(cfg: Any, torch_dtype: Any) -> Any:
        if isinstance(target, str) and ":" not in target:
            return load_reference(f"{target}:build")(cfg, torch_dtype)
        return load_reference(target)(cfg, torch_dtype)

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

    from dexrl.bridge.launch import cpu_platform

    cpu_platform.install()
    targets = builders()
    for model_type, build in targets.items():
        rlinf.models.register_model(model_type, build, category="embodied", force=True)
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
