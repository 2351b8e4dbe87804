"""Run every doctor area under one time budget and collect one row per check, in a fixed order.

Areas whose probes are child processes (CUDA then rendering, LIBERO) run in threads while the
main thread runs the config, stack, Ray and checkpoint areas, so ``--quick`` stays short. An area
is a generator of rows: when it raises, the rows it already gave are kept, the check it was on
becomes a ``fail`` with the exception's one line, and the rest become ``skip``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from dexrl.config.compose import renders
from dexrl.doctor import (
    CRASH_FIX,
    CheckResult,
    checkpoint_area,
    cluster,
    cuda,
    fail,
    libero,
    ok,
    one_line,
    render,
    skip,
    stack,
    warn,
)
from dexrl.doctor.context import BudgetExhausted, Context
from dexrl.errors import Finding

AreaRun = Callable[[Context], Iterable[CheckResult]]


@dataclass(frozen=True)
class Area:
    """A group of checks sharing probes, with the ids of its rows in order."""

    name: str
    run: AreaRun
    ids: tuple[str, ...]


def check_config(name: str, findings: Sequence[Finding]) -> CheckResult:
    """The config checks ``dexrl validate`` runs, as one row."""
    errors = [f for f in findings if f.level == "error"]
    warnings = [f for f in findings if f.level == "warning"]
    facts = {"config": name, "findings": [f.render() for f in findings]}
    if errors:
        more = f" (+{len(errors) - 1} more; `dexrl validate` lists all)" if len(errors) > 1 else ""
        return fail("config.checks", f"{name}: {errors[0].where}: {errors[0].message}{more}",
                    errors[0].hint, **facts)
    if warnings:
        more = f" (+{len(warnings) - 1} more)" if len(warnings) > 1 else ""
        return warn("config.checks", f"{name}: {warnings[0].where}: {warnings[0].message}{more}",
                    warnings[0].hint, **facts)
    return ok("config.checks", f"{name} is well-formed", **facts)


def config_area(findings: Sequence[Finding] | None) -> AreaRun:
    """The config row: the validate findings, or a skip without a config."""
    def run(ctx: Context) -> Iterable[CheckResult]:
        if ctx.cfg is None or findings is None:
            yield skip("config.checks", "no config chosen", "pass --suite S --model M or "
                       "--config-name NAME to check a launch of that config")
        else:
            yield check_config(ctx.config_name or "config", findings)
    return run


def rendering_only(name: str, run: AreaRun, ids: tuple[str, ...]) -> Area:
    """An area that only LIBERO's envs need: its rows are skipped for a config whose envs are
    dexrl's own tasks, which render nothing and import no LIBERO."""
    def gated(ctx: Context) -> Iterable[CheckResult]:
        if ctx.cfg is not None and not renders(ctx.cfg):
            for check in ids:
                yield skip(check, f"{ctx.config_name or 'the config'} uses dexrl's own tasks, "
                           "which render nothing and need no LIBERO", "nothing to do for this "
                           "config; pass a LIBERO suite to check rendering and LIBERO")
            return
        yield from run(ctx)
    return Area(name, gated, ids)


def areas(findings: Sequence[Finding] | None) -> list[Area]:
    """Every area in report order."""
    return [
        Area("config", config_area(findings), ("config.checks",)),
        Area("stack", stack.run, ("stack.versions", "stack.mujoco", "stack.serializer")),
        Area("cuda", cuda.run, ("cuda.devices", "cuda.placement")),
        rendering_only("render", render.run,
                       ("render.backend", "render.egl", "render.offscreen")),
        rendering_only("libero", libero.run,
                       ("libero.import", "libero.config", "libero.assets", "libero.env")),
        Area("ray", cluster.run, ("ray.stale", "ray.nodes", "ray.node_rank", "ray.placement",
                                  "ray.ram", "ray.shm",
                                  "extension.roundtrip")),
        Area("checkpoint", checkpoint_area.run, ("checkpoint.files", "checkpoint.disk")),
    ]


def run_area(area: Area, ctx: Context) -> list[CheckResult]:
    """All rows of one area, whatever happens inside it."""
    rows: list[CheckResult] = []
    start = time.monotonic()
    try:
        for row in area.run(ctx):
            rows.append(row)
    except BudgetExhausted as exc:
        return rows + _rest(area, rows, f"not run: {exc}",
                            f"rerun with --budget {int(ctx.budget.total_s * 2)}")
    except Exception as exc:  # a crashing probe must not stop the other areas
        done = {r.id for r in rows}
        missing = [i for i in area.ids if i not in done]
        if missing:
            rows.append(fail(missing[0], f"probe crashed: {one_line(exc)}", CRASH_FIX)
                        .timed(time.monotonic() - start))
    return rows + _rest(area, rows, "not run: an earlier check of this area failed",
                        f"fix {rows[-1].id} first" if rows else "see above")


def _rest(area: Area, rows: list[CheckResult], finding: str, fix: str) -> list[CheckResult]:
    done = {r.id for r in rows}
    return [skip(i, finding, fix) for i in area.ids if i not in done]


def run_doctor(ctx: Context, all_areas: Sequence[Area],
               threaded: Sequence[Sequence[str]] = (("cuda", "render"), ("libero",)),
               grace_s: float = 5.0) -> list[CheckResult]:
    """Run every area; areas named in ``threaded`` run in background threads, in those chains.

    A thread still running ``grace_s`` after the budget is over is abandoned (its rows fail).

    Returns:
        The rows of every area, in the order of ``all_areas``.
    """
    by_name = {a.name: a for a in all_areas}
    results: dict[str, list[CheckResult]] = {}
    threaded = [[n for n in names if n in by_name] for names in threaded]

    def chain(names: Sequence[str]) -> None:
        for name in names:
            results[name] = run_area(by_name[name], ctx)

    in_threads = {n for names in threaded for n in names}
    threads = [threading.Thread(target=chain, args=(names,), daemon=True,
                                name=f"doctor-{'-'.join(names)}") for names in threaded]
    for t in threads:
        t.start()
    chain([a.name for a in all_areas if a.name not in in_threads])
    for t in threads:
        t.join(max(ctx.budget.remaining(), 0.0) + grace_s)
    rows: list[CheckResult] = []
    for area in all_areas:
        rows += results.get(area.name) or [
            fail(i, f"not finished within the {ctx.budget.total_s:.0f} s budget",
                 f"rerun with --budget {int(ctx.budget.total_s * 2)}") for i in area.ids]
    return rows
