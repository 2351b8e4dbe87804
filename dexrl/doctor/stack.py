"""Check 1, the Python stack: installed versions against the ranges dexrl's packaging declares.

The supported ranges are read back from the installed ``dexrl`` distribution's metadata
(``pyproject.toml`` is the one source of truth); nothing here repeats them. For numpy and pyarrow
the range is what was tested, not what works: ``stack.serializer`` decides those by a probe.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from dexrl.doctor import CheckResult, fail, guarded, ok, warn
from dexrl.doctor.context import Context
from dexrl.doctor.serializer import check_serializer, probe_serializer
from dexrl.versions import PACKAGES, installed_versions

# LIBERO's published success rates were measured with this MuJoCo; others render slightly
# differently (0.3 % of pixels with 3.3.7), so results are not strictly comparable.
LIBERO_MUJOCO = "3.3.2"
# Outside its range, one of these is untested rather than broken (numpy 2.x ran the whole pipeline):
# a warning here, and ``stack.serializer`` fails it if it breaks.
PROBED = frozenset({"numpy", "pyarrow"})
SERIALIZER_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class StackFacts:
    """Installed versions (``None``: not installed) and the supported ranges.

    Attributes:
        versions: Display name -> installed version; ``python`` included.
        ranges: Display name -> specifier string dexrl declares (absent: no range declared).
    """

    versions: dict[str, str | None]
    ranges: dict[str, str]


def supported_ranges(dist: str = "dexrl") -> dict[str, str]:
    """Display name -> version specifier, from the installed distribution's metadata."""
    by_dist = {canonicalize_name(d): name for name, d in PACKAGES.items()}
    ranges: dict[str, str] = {}
    python = metadata.metadata(dist).get("Requires-Python")
    if python:
        ranges["python"] = str(SpecifierSet(python))
    for line in metadata.requires(dist) or []:
        req = Requirement(line)
        if req.marker is not None and "extra" in str(req.marker):
            continue  # optional extras are not part of what every install needs
        name = by_dist.get(canonicalize_name(req.name))
        if name and str(req.specifier):
            ranges[name] = str(req.specifier)
    return ranges


def probe_stack() -> StackFacts:
    """Installed versions and the supported ranges, both from metadata."""
    return StackFacts(installed_versions(), supported_ranges())


def check_versions(facts: StackFacts) -> CheckResult:
    """Fail on a missing package or a version outside dexrl's declared range.

    A :data:`PROBED` package outside its range only warns: ``stack.serializer`` judges it.
    """
    problems: list[str] = []
    untested: list[str] = []
    for name, spec in facts.ranges.items():
        version = facts.versions.get(name)
        if version is None:
            problems.append(f"{name} is not installed (needs {spec})")
        elif not SpecifierSet(spec).contains(version, prereleases=True):
            (untested if name in PROBED else problems).append(f"{name} {version} is outside {spec}")
    missing = [n for n, v in facts.versions.items() if v is None and n not in facts.ranges]
    problems += [f"{name} is not installed" for name in missing]
    shown = dict(facts.versions)
    if problems:
        return fail("stack.versions", "; ".join(problems + untested),
                    "reinstall in a fresh virtual environment with `make install` (it applies "
                    "dexrl's pinned ranges), or `pip install '<package><range>'` for each one",
                    versions=shown, ranges=facts.ranges)
    if untested:
        return warn("stack.versions",
                    f"{'; '.join(untested)}: untested with dexrl; stack.serializer shows whether "
                    "it works", "nothing to do while stack.serializer is ok; for a tested version, "
                    "`pip install '<package><range>'`", versions=shown, ranges=facts.ranges)
    return ok("stack.versions",
              f"{len(facts.versions)} packages within dexrl's ranges (python "
              f"{facts.versions['python']}, torch {facts.versions['torch']}, rlinf "
              f"{facts.versions['rlinf']})", versions=shown, ranges=facts.ranges)


def check_mujoco(facts: StackFacts) -> CheckResult:
    """Warn when MuJoCo is not the version LIBERO's published numbers used."""
    version = facts.versions.get("mujoco")
    if version is None:
        return fail("stack.mujoco", "mujoco is not installed", "run `make install`")
    if version != LIBERO_MUJOCO:
        return warn("stack.mujoco",
                    f"mujoco {version}: LIBERO's published results used {LIBERO_MUJOCO}; frames "
                    "differ slightly, so success rates are not strictly comparable",
                    f"`pip install mujoco=={LIBERO_MUJOCO}` when comparing with published "
                    "numbers", version=version)
    return ok("stack.mujoco", f"mujoco {version}, as LIBERO's published results", version=version)


def run(ctx: Context) -> Iterator[CheckResult]:
    """Probe and check the stack: versions and MuJoCo from metadata, then the serializer probe."""
    facts = probe_stack()
    ctx.facts["versions"] = facts.versions
    yield guarded("stack.versions", check_versions, facts)
    yield guarded("stack.mujoco", check_mujoco, facts)
    start = time.monotonic()
    found = probe_serializer(ctx.budget.timeout(SERIALIZER_TIMEOUT_S))
    yield guarded("stack.serializer", check_serializer, found).timed(time.monotonic() - start)
