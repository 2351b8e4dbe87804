"""Render doctor results: a terminal table, a JSON document, a Markdown block for bug reports.

Design notes: docs/cli.md (the doctor JSON document) and docs/design/doctor.md.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, is_dataclass
from datetime import datetime, timezone
from typing import Any

from rich.console import Console
from rich.table import Table

from dexrl import __version__
from dexrl.doctor import STATUSES, CheckResult
from dexrl.doctor.context import Context

SCHEMA = "dexrl.doctor/1"
# Variables that change what a launch does; nothing secret (no tokens) is ever listed.
ENV_VARS = ("CUDA_VISIBLE_DEVICES", "MUJOCO_GL", "PYOPENGL_PLATFORM", "MUJOCO_EGL_DEVICE_ID",
            "__EGL_VENDOR_LIBRARY_FILENAMES", "__EGL_VENDOR_LIBRARY_DIRS", "DISPLAY",
            "RAY_ADDRESS", "RAY_AUTH_MODE", "RLINF_NODE_RANK", "RLINF_EXT_MODULE",
            "LIBERO_CONFIG_PATH", "DEXRL_HOME", "HF_HOME", "HF_ENDPOINT", "HF_HUB_OFFLINE",
            "TOKENIZERS_PARALLELISM", "TORCHINDUCTOR_CACHE_DIR")
ENV_PREFIXES = ("NCCL_",)
STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red", "skip": "dim"}


def exit_code(rows: Sequence[CheckResult]) -> int:
    """1 when any check failed, else 0 (warnings alone do not fail)."""
    return 1 if any(r.status == "fail" for r in rows) else 0


def summary(rows: Sequence[CheckResult]) -> dict[str, int]:
    """Count of rows per status, every status present."""
    counts = Counter(r.status for r in rows)
    return {s: counts.get(s, 0) for s in STATUSES}


def relevant_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment variables that matter for a launch, when set."""
    env = os.environ if environ is None else environ
    return {k: env[k] for k in sorted(env)
            if k in ENV_VARS or k.startswith(ENV_PREFIXES)}


def environment(ctx: Context) -> dict[str, Any]:
    """The environment block: interpreter, versions, GPUs, driver, variables."""
    cuda = ctx.facts.get("cuda")
    return {
        "python": platform.python_version(), "executable": sys.executable,
        "platform": platform.platform(), "versions": ctx.facts.get("versions", {}),
        "gpus": [asdict(g) for g in cuda.gpus] if cuda is not None else [],
        "driver": cuda.driver if cuda is not None else None,
        "cuda": cuda.torch_cuda if cuda is not None else None,
        "env": ctx.facts.get("env", relevant_env()),
    }


def options(ctx: Context) -> dict[str, Any]:
    """What the user asked for."""
    return {"suite": ctx.suite, "config": ctx.config_name,
            "ckpt": str(ctx.ckpt) if ctx.ckpt else None, "ray_address": ctx.ray_address,
            "quick": ctx.quick, "budget_s": ctx.budget.total_s}


def _plain(value: Any) -> Any:
    return asdict(value) if is_dataclass(value) and not isinstance(value, type) else str(value)


def to_json(rows: Sequence[CheckResult], ctx: Context, elapsed: float) -> str:
    """The stable JSON document (schema :data:`SCHEMA`)."""
    doc = {
        "schema": SCHEMA, "dexrl": __version__,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "options": options(ctx), "elapsed_s": round(elapsed, 2), "exit_code": exit_code(rows),
        "summary": summary(rows), "environment": environment(ctx),
        "checks": [{"id": r.id, "status": r.status, "finding": r.finding, "fix": r.fix or None,
                    "seconds": None if r.seconds is None else round(r.seconds, 2),
                    "details": r.details} for r in rows],
    }
    return json.dumps(doc, indent=2, default=_plain)


def summary_line(rows: Sequence[CheckResult], elapsed: float, budget: float) -> str:
    """e.g. ``2 fail, 3 warn, 10 ok, 2 skip in 14.2 s (budget 300 s)``."""
    counts = summary(rows)
    parts = ", ".join(f"{counts[s]} {s}" for s in ("fail", "warn", "ok", "skip"))
    return f"{parts} in {elapsed:.1f} s (budget {budget:.0f} s)"


def print_table(rows: Sequence[CheckResult], elapsed: float, budget: float,
                console: Console) -> None:
    """The terminal table and a summary line."""
    table = Table(title="dexrl doctor", show_lines=False, expand=False)
    for col in ("check", "status", "finding", "fix"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(r.id, f"[{STYLE[r.status]}]{r.status}[/]", r.finding, r.fix or "",
                      style="dim" if r.status == "skip" else None)
    console.print(table)
    verdict = ("[bold red]some checks failed[/]" if exit_code(rows)
               else "[green]nothing failed[/]")
    console.print(f"{verdict}: {summary_line(rows, elapsed, budget)}")


def _cell(text: Any) -> str:
    return str(text if text is not None else "").replace("|", "\\|").replace("\n", " ")


def to_markdown(rows: Sequence[CheckResult], ctx: Context, elapsed: float) -> str:
    """A block to paste into a bug report: versions, GPUs, driver, variables, results."""
    env = environment(ctx)
    gpus = env["gpus"]
    gpu_line = (f"{len(gpus)} × {', '.join(sorted({g['name'] for g in gpus}))} (driver "
                f"{env['driver'] or 'unknown'}, CUDA {env['cuda']})" if gpus
                else f"none visible (driver {env['driver'] or 'not found'}, torch CUDA "
                     f"{env['cuda'] or 'none'})")
    opts = options(ctx)
    asked = ", ".join(f"{k}={v}" for k, v in opts.items() if v not in (None, False))
    lines = [
        "### `dexrl doctor` report", "",
        f"- dexrl {__version__}, Python {env['python']} ({env['executable']})",
        f"- Platform: {env['platform']}",
        f"- GPUs: {gpu_line}",
        f"- Options: {asked}",
        f"- Result: {summary_line(rows, elapsed, ctx.budget.total_s)}", "",
        "| package | version |", "|---|---|",
        *(f"| {_cell(k)} | {_cell(v or 'not installed')} |" for k, v in env["versions"].items()),
        "", "| variable | value |", "|---|---|",
        *(f"| {_cell(k)} | `{_cell(v)}` |" for k, v in env["env"].items()),
        *([] if env["env"] else ["| (none of the relevant variables is set) | |"]),
        "", "| check | status | finding | fix |", "|---|---|---|---|",
        *(f"| {_cell(r.id)} | {r.status} | {_cell(r.finding)} | {_cell(r.fix)} |" for r in rows),
    ]
    return "\n".join(lines) + "\n"
