"""Check 7, the checkpoint: ``dexrl download``'s verification, plus disk for the planned saves."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from dexrl.checkpoints.files.layout import weight_files
from dexrl.checkpoints.verify import Verification, verify_checkpoint
from dexrl.config.checks import Facts
from dexrl.doctor import CheckResult, fail, guarded, ok, skip, warn
from dexrl.doctor.context import NO_CONFIG_FIX, Context
from dexrl.errors import DexrlError
from dexrl.hub.manifest import Manifest, read_download_manifest
from dexrl.runs.layout import RUNS_ROOT
from dexrl.training.plan import make_plan

GB = 1e9


def size(n: float) -> str:
    """Bytes as GB, or MB below a tenth of a GB."""
    return f"{n / GB:.1f} GB" if n >= 0.1 * GB else f"{n / 1e6:.1f} MB"

DISK_MARGIN = 0.8  # warn when the saves would take more than this share of the free space
CKPT_FIX = "pass --ckpt PATH (or a repo id fetched by `dexrl download`), or a config"


@dataclass(frozen=True)
class Provenance:
    """The ``dexrl download`` manifest of a checkpoint, if any, and files changed since."""

    manifest: Manifest | None
    changed: tuple[str, ...] = ()
    error: str | None = None


def read_provenance(path: Path) -> Provenance:
    """Read the download manifest and compare the files with it."""
    try:
        manifest = read_download_manifest(path)
    except DexrlError as exc:
        return Provenance(None, (), exc.message)
    if manifest is None:
        return Provenance(None)
    return Provenance(manifest, tuple(manifest.changed_files(path)))


def check_files(v: Verification, p: Provenance) -> CheckResult:
    """The same verification as ``dexrl download``, and no file changed since it passed."""
    errors = [f for f in v.findings if f.level == "error"]
    warnings = [f for f in v.findings if f.level == "warning"]
    facts = {"path": str(v.path), "model_type": v.model_type, "checked": v.checks,
             "notes": v.notes, "findings": [f.render() for f in v.findings]}
    if errors:
        more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
        return fail("checkpoint.files", f"{errors[0].where}: {errors[0].message}{more}",
                    errors[0].hint, **facts)
    if p.changed:
        repo = p.manifest.repo_id if p.manifest else "REPO"
        return fail("checkpoint.files", f"{v.path}: files changed since `dexrl download` verified "
                    f"them: {', '.join(p.changed[:3])}", f"`dexrl download {repo} --force`",
                    **facts)
    origin = p.manifest.describe() if p.manifest else "no download manifest"
    count = v.weights.parameters if v.weights else 0
    params = (f", {count / 1e9:.2f} B parameters" if count >= 1e8 else
              f", {count / 1e6:.2f} M parameters") if v.weights else ""
    head = f"{v.path}: {v.model_type}{params}; checked {', '.join(v.checks)}"
    if p.error:
        return warn("checkpoint.files", f"{head}; {p.error}",
                    "run `dexrl download` for this checkpoint again", **facts)
    if warnings:
        return warn("checkpoint.files", f"{head}; {warnings[0].message}", warnings[0].hint,
                    **facts)
    return ok("checkpoint.files", f"{head} ({origin})", **facts)


def free_bytes(target: Path) -> tuple[Path, int]:
    """Free space where ``target`` is or would be created (its nearest existing folder)."""
    folder = target.resolve()
    while not folder.exists():
        folder = folder.parent
    return folder, shutil.disk_usage(folder).free


def check_disk(model_bytes: int, saves: int | None, where: Path, free: int) -> CheckResult:
    """Free disk for ``saves`` checkpoints of about the model's size each."""
    if saves is None:
        return skip("checkpoint.disk", "no config: the number of saves is unknown", NO_CONFIG_FIX)
    need = saves * model_bytes
    facts = {"saves": saves, "model_bytes": model_bytes, "need_bytes": need, "free_bytes": free,
             "folder": str(where)}
    head = f"{saves} save(s) × ≈{size(model_bytes)} ≈ {size(need)}; {size(free)} free at {where}"
    fix = ("free disk there, raise runner.save_interval, or give `dexrl train` a --run-dir on a "
           "larger disk")
    if need > free:
        return fail("checkpoint.disk", f"{head}: the run would fill the disk", fix, **facts)
    if need > DISK_MARGIN * free:
        return warn("checkpoint.disk", f"{head}: little room left", fix, **facts)
    return ok("checkpoint.disk", head, **facts)


def run(ctx: Context) -> Iterator[CheckResult]:
    """Verify the checkpoint and check disk for the run's saves."""
    if ctx.ckpt is None:
        yield skip("checkpoint.files", "no checkpoint given", CKPT_FIX)
        yield skip("checkpoint.disk", "no checkpoint given", CKPT_FIX)
        return
    start = time.monotonic()
    expected = ctx.settings.actor.model.model_type if ctx.settings is not None else None
    verification = verify_checkpoint(ctx.ckpt, str(expected) if expected else None)
    provenance = read_provenance(ctx.ckpt) if ctx.ckpt.is_dir() else Provenance(None)
    yield guarded("checkpoint.files", check_files, verification, provenance).timed(
        time.monotonic() - start)
    saves = None
    if ctx.cfg is not None:
        saves = make_plan(ctx.cfg, Facts(ctx.suite, 1)).saves
    try:
        size = sum(f.stat().st_size for f in weight_files(ctx.ckpt))
    except DexrlError:
        size = 0  # checkpoint.files reports why there are no weights
    where, free = free_bytes(RUNS_ROOT)
    yield guarded("checkpoint.disk", check_disk, size, saves, where, free)
