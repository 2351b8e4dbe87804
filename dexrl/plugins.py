"""Policies from other distributions: entry points in the ``dexrl.policies`` group.

Design notes: docs/design/policy-adapters.md and docs/adding-a-policy.md.
"""

from __future__ import annotations

import functools
import importlib.util
import re
from collections import defaultdict
from dataclasses import dataclass, replace
from importlib import metadata, resources

from dexrl.errors import DexrlError, one_line
from dexrl.models import BUILTIN_POLICIES as POLICIES
from dexrl.specs import SUITES, ModelSpec, Policy

GROUP = "dexrl.policies"
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_CALLABLE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def _is_reference(value: object) -> bool:
    """A plugin's ``"module:attribute"`` string (a plugin declares its code by name)."""
    return isinstance(value, str) and _CALLABLE.match(value) is not None


@dataclass(frozen=True)
class PluginProblem:
    """A plugin that was left out, and why.

    Attributes:
        names: Policy names (and model types) it makes unusable.
        distributions: The distributions involved.
        message: What is wrong, in one line.
        hint: How to fix it.
    """

    names: tuple[str, ...]
    distributions: tuple[str, ...]
    message: str
    hint: str

    def error(self) -> DexrlError:
        """The DexrlError shown when one of its names is chosen."""
        dists = ", ".join(self.distributions)
        return DexrlError(self.message, self.hint, where=f"{GROUP} plugin(s) from {dists}",
                          code="plugin-unusable")


@dataclass(frozen=True)
class Discovery:
    """The valid plugin policies by name, and the problems of the others."""

    policies: dict[str, Policy]
    problems: tuple[PluginProblem, ...]


@functools.cache
def discover() -> Discovery:
    """Load and check every ``dexrl.policies`` entry point once per process."""
    candidates: list[Policy] = []
    problems: list[PluginProblem] = []
    for ep in metadata.entry_points(group=GROUP):
        dist = ep.dist.name if ep.dist is not None else "an unknown distribution"
        try:
            declared = ep.load()
        except Exception as exc:  # any import-time failure of someone else's code
            problems.append(PluginProblem(
                (ep.name,), (dist,),
                f"policy plugin '{ep.name}' from {dist} failed to load ({ep.value}): "
                f"{type(exc).__name__}: {one_line(exc, typed=False)}",
                f"fix or reinstall {dist} (`python -c 'import {ep.module}'` shows the error), "
                f"or uninstall it"))
            continue
        problem = _check(ep.name, dist, ep.value, declared)
        if problem is not None:
            problems.append(problem)
        else:
            candidates.append(replace(declared, distribution=dist))
    valid, conflicts = _resolve_conflicts(candidates)
    return Discovery(valid, tuple(problems + conflicts))


def refresh() -> None:
    """Forget what :func:`discover` found (after installing or removing a plugin in-process)."""
    discover.cache_clear()


def _invalid(name: str, dist: str, what: str, hint: str) -> PluginProblem:
    return PluginProblem((name,), (dist,), f"policy plugin '{name}' from {dist} {what}", hint)


def _check(name: str, dist: str, value: str, declared: object) -> PluginProblem | None:
    """The first thing wrong with one declaration, or None."""
    if not isinstance(declared, Policy):
        return _invalid(name, dist, f"declares {value}, which is a {type(declared).__name__}, "
                        "not a dexrl.catalog.Policy", "point the entry point at a Policy(...)")
    if declared.name != name or not _NAME.match(name) or not _NAME.match(declared.model_type):
        return _invalid(name, dist, f"declares a policy named '{declared.name}' with model type "
                        f"'{declared.model_type}'", "use the entry point's name as Policy.name; "
                        "names and model types are lower_snake_case")
    if not _is_reference(declared.builder) or not _module_exists(str(declared.builder)):
        return _invalid(name, dist, f"has no builder: '{declared.builder}' is not an importable "
                        "'module:function'", "set Policy.builder to 'your.module:build'")
    if declared.smoke_checkpoint is not None and not _is_reference(declared.smoke_checkpoint):
        return _invalid(name, dist, f"has a malformed smoke_checkpoint "
                        f"'{declared.smoke_checkpoint}'", "use 'module:function' or None")
    if not isinstance(declared.model, ModelSpec):
        return _invalid(name, dist, f"declares model={declared.model!r}, not a "
                        "dexrl.catalog.ModelSpec", "set Policy.model to a ModelSpec(...)")
    for field, hook in _references(declared.model):
        if not _is_reference(hook):
            return _invalid(name, dist, f"has a malformed ModelSpec.{field} '{hook}'",
                            "use 'module:attribute' or None")
    config = f"model/{declared.model_config_name}.yaml"
    if not _has_file(declared.config_package, config):
        return _invalid(name, dist, f"has no model config: {config} not found in package "
                        f"'{declared.config_package}'", "ship the YAML as package data and set "
                        "Policy.config_package to the package that holds the model/ folder")
    templates = {p.model_type for p in POLICIES.values()}
    if declared.template not in templates:
        return _invalid(name, dist, f"names an unknown template '{declared.template}'",
                        f"use one of {', '.join(sorted(templates))}")
    unknown = [s for s in declared.suites if s not in SUITES]
    if unknown or not declared.suites:
        return _invalid(name, dist, f"declares unknown suites {unknown or '(none)'}",
                        f"use some of {', '.join(SUITES)}")
    return None


def _references(spec: ModelSpec) -> list[tuple[str, str]]:
    """The ``"module:attribute"`` references a spec sets, by field name."""
    names = ("extra_keys", "check_tensors", "check_config", "inference")
    return [(n, getattr(spec, n)) for n in names if getattr(spec, n) is not None]


def _module_exists(target: str) -> bool:
    try:
        return importlib.util.find_spec(target.split(":")[0]) is not None
    except (ImportError, ValueError):
        return False


def _has_file(package: str, path: str) -> bool:
    try:
        return resources.files(package).joinpath(path).is_file()
    except (ImportError, TypeError, ValueError):
        return False


def _resolve_conflicts(candidates: list[Policy]) -> tuple[dict[str, Policy], list[PluginProblem]]:
    """Drop plugins that claim one name or model type together, or shadow a built-in silently."""
    claims: dict[str, list[Policy]] = defaultdict(list)
    for p in candidates:
        claims[p.name].append(p)
        if p.model_type != p.name:
            claims[p.model_type].append(p)
    dropped: set[str] = set()
    problems: list[PluginProblem] = []
    for key, claimants in claims.items():
        if len(claimants) > 1:
            dists = tuple(sorted({p.distribution for p in claimants}))
            names = tuple(sorted({key, *(p.name for p in claimants)}))
            problems.append(PluginProblem(
                names, dists, f"policy '{key}' is claimed by more than one plugin: "
                f"{', '.join(dists)}", "uninstall all but one of them"))
            dropped.update(p.name for p in claimants)
    builtin_keys = {k: b for b in POLICIES.values() for k in (b.name, b.model_type)}
    for p in candidates:
        shadowed = builtin_keys.get(p.name) or builtin_keys.get(p.model_type)
        if p.name not in dropped and shadowed is not None and not p.replaces_builtin:
            problems.append(PluginProblem(
                (p.name, shadowed.name, shadowed.model_type),
                (p.distribution, shadowed.distribution),
                f"policy plugin '{p.name}' from {p.distribution} shadows dexrl's built-in "
                f"'{shadowed.name}' ({shadowed.model_type})",
                "rename the plugin's policy and model type, or set replaces_builtin=True in its "
                "declaration to replace the built-in on purpose"))
            dropped.add(p.name)
    return {p.name: p for p in candidates if p.name not in dropped}, problems
