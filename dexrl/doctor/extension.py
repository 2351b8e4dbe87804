"""Check 6, the extension-module round trip in real Ray workers on every node.

The work is :func:`dexrl.bridge.launch.worker_probe.check_registration`, the same function
``train`` runs before it launches; this module only turns its results into a doctor row.
"""

from __future__ import annotations

from collections.abc import Sequence

from omegaconf import DictConfig

from dexrl.bridge.launch.driver import worker_env
from dexrl.bridge.launch.worker_probe import RoundTrip, check_registration
from dexrl.bridge.registry import EXT_MODULE, builders
from dexrl.config.settings import settings_of
from dexrl.doctor import CheckResult, fail, ok
from dexrl.errors import DexrlError
from dexrl.plugins import PluginProblem, discover


def model_types(cfg: DictConfig | None) -> list[str]:
    """The config's model type, or every registered policy (plugins' included) without a config."""
    chosen = settings_of(cfg).actor.model.model_type if cfg is not None else None
    return [str(chosen)] if chosen else sorted(builders())


def probe_roundtrip(types: Sequence[str], timeout: float,
                    ext_module: str = EXT_MODULE) -> list[RoundTrip]:
    """Run the round trip on every alive node of the connected Ray, with train's worker env."""
    env = worker_env(probe_gl=False, ext_module=ext_module)
    return check_registration(types, ext_module, env=env, timeout_s=timeout)


def check_roundtrip(results: Sequence[RoundTrip], types: Sequence[str],
                    problems: Sequence[PluginProblem] | None = None) -> CheckResult:
    """Every node's worker must import the module, register, and resolve every model type.

    A broken policy plugin (``problems``, default: what this process discovered) fails the check
    too, by name: the others still registered, but that policy cannot be trained.
    """
    problems = discover().problems if problems is None else problems
    facts = {"model_types": list(types),
             "nodes": [{"node": r.node, "ok": r.ok, "message": r.message} for r in results],
             "plugin_problems": [p.message for p in problems]}
    if not results:
        return fail("extension.roundtrip", "no Ray node ran the round trip",
                    "check `ray status`; every node needs a live raylet", **facts)
    bad = [r for r in results if not r.ok]
    if bad:
        try:
            bad[0].raise_for_failure()  # the message and hint train shows for the same failure
        except DexrlError as exc:
            where = f"{exc.where}: " if exc.where else ""
            more = f" ({len(bad)} of {len(results)} nodes failed)" if len(results) > 1 else ""
            return fail("extension.roundtrip", f"{where}{exc.message}{more}",
                        exc.hint or "see the message", traceback=bad[0].traceback, **facts)
    if problems:
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        return fail("extension.roundtrip", f"{problems[0].message}{more}", problems[0].hint,
                    **facts)
    return ok("extension.roundtrip",
              f"{len(results)} node(s): a Ray worker loaded {results[0].ext_module} through "
              f"RLinf's loader and resolved {', '.join(types)}", **facts)
