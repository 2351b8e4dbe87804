"""Check 4, LIBERO: imports without prompting, its config file, scene assets, one real env step.

The import and the env step run in child interpreters with stdin closed, so a LIBERO that asks a
question fails with a clear message instead of waiting forever.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from dexrl.doctor import CheckResult, fail, guarded, ok, skip
from dexrl.doctor.context import Context
from dexrl.errors import one_line
from dexrl.hub.libero_assets import (
    is_asset_tree,
    libero_assets_dir,
    libero_config_dir,
    use_libero_config_dir,
)
from dexrl.subproc import ProbeError, run_probe

# Keys of LIBERO's config file that must point into the installed package.
CONFIG_KEYS = ("benchmark_root", "bddl_files", "init_states", "assets")
ASSETS_FIX = "run `dexrl download --libero-assets`"
INSTALL_FIX = "run `make install` (it installs rlinf-libero==0.1.3, which never prompts)"


@dataclass(frozen=True)
class LiberoConfig:
    """LIBERO's config file as found after the import.

    Attributes:
        file: ``<LIBERO_CONFIG_PATH>/config.yaml``.
        paths: Its key -> path entries (``None``: missing or unreadable).
        error: Why it could not be read.
        package_dir: The installed ``libero/libero`` folder (``None``: not installed).
    """

    file: str
    paths: dict[str, str] | None
    error: str | None
    package_dir: str | None


def import_libero() -> dict[str, Any]:
    """Child-side probe: import LIBERO the way RLinf does, after dexrl picks its config folder."""
    use_libero_config_dir()
    start = time.perf_counter()
    import libero.libero
    import libero.libero.benchmark  # noqa: F401 - what rlinf.envs.libero imports

    return {"seconds": time.perf_counter() - start, "config_file": libero.libero.config_file}


def step_env(suite: str, steps: int = 10) -> dict[str, Any]:
    """Child-side probe: create one env of ``suite`` (task 0), reset to an init state, step."""
    use_libero_config_dir()
    import numpy as np
    from libero.libero import benchmark, get_libero_path
    from libero.libero.envs import OffScreenRenderEnv

    t0 = time.perf_counter()
    bench = benchmark.get_benchmark_dict()[suite]()
    task = bench.get_task(0)
    bddl = os.path.join(get_libero_path("bddl_files"), task.problem_folder, task.bddl_file)
    env = OffScreenRenderEnv(bddl_file_name=bddl, camera_heights=256, camera_widths=256)
    t1 = time.perf_counter()
    env.seed(0)
    env.reset()
    obs = env.set_init_state(bench.get_task_init_states(0)[0])
    t2 = time.perf_counter()
    for _ in range(steps):
        obs, _, _, _ = env.step(np.zeros(7))
    t3 = time.perf_counter()
    shape = list(obs["agentview_image"].shape)
    env.close()
    return {"task": task.name, "create_s": t1 - t0, "reset_s": t2 - t1, "steps": steps,
            "steps_per_s": steps / (t3 - t2), "image_shape": shape}


def read_config() -> LiberoConfig:
    """Read LIBERO's config file (where dexrl points ``LIBERO_CONFIG_PATH``)."""
    file = libero_config_dir() / "config.yaml"
    try:
        package = str(libero_assets_dir().parent)
    except Exception:  # DexrlError: LIBERO not installed; the import check says so
        package = None
    try:
        data = yaml.safe_load(file.read_text())
    except (OSError, yaml.YAMLError) as exc:
        return LiberoConfig(str(file), None, one_line(exc, typed=False), package)
    if not isinstance(data, dict):
        return LiberoConfig(str(file), None, "not a mapping", package)
    return LiberoConfig(str(file), {str(k): str(v) for k, v in data.items()}, None, package)


def check_import(result: dict[str, Any] | None, error: str | None) -> CheckResult:
    """``libero.libero`` must import, and without asking anything."""
    if error is not None:
        if "EOFError" in error:
            return fail("libero.import",
                        "importing libero.libero asked for input (a LIBERO that prompts "
                        "hangs Ray workers)", INSTALL_FIX)
        return fail("libero.import", f"importing libero.libero failed: {error}", INSTALL_FIX)
    assert result is not None
    return ok("libero.import", f"libero.libero imports in {result['seconds']:.1f} s without "
              "prompting", config_file=result["config_file"])


def check_config(c: LiberoConfig) -> CheckResult:
    """LIBERO's config file exists and its paths exist inside the installed package."""
    fix = (f"delete {c.file} (LIBERO writes a fresh one at the next import) or point "
           "LIBERO_CONFIG_PATH at a folder of this environment")
    if c.paths is None:
        return fail("libero.config", f"{c.file} cannot be read: {c.error}", fix)
    if c.package_dir is None:
        return fail("libero.config", "the libero package is not installed", INSTALL_FIX)
    package = Path(os.path.normpath(c.package_dir))
    for key in CONFIG_KEYS:
        value = c.paths.get(key)
        if value is None:
            return fail("libero.config", f"{c.file} has no '{key}' entry", fix)
        path = Path(os.path.normpath(value))
        if not path.is_relative_to(package):
            return fail("libero.config",
                        f"{c.file}: {key} points at {value}, outside this environment's LIBERO "
                        f"({package})", fix, paths=c.paths)
        if not path.exists():
            return fail("libero.config", f"{c.file}: {key} path {value} does not exist", fix,
                        paths=c.paths)
    return ok("libero.config", f"{c.file} points into {package}", paths=c.paths)


def check_assets(c: LiberoConfig) -> CheckResult:
    """The scene assets LIBERO will load are present (else it downloads them at first use)."""
    if c.paths and c.paths.get("assets"):
        assets = Path(c.paths["assets"])
    elif c.package_dir:
        assets = Path(c.package_dir) / "assets"
    else:
        return fail("libero.assets", "the libero package is not installed", INSTALL_FIX)
    if is_asset_tree(assets):
        target = assets.resolve()
        shown = str(assets) if target == assets else f"{assets} -> {target}"
        return ok("libero.assets", f"scene assets at {shown}", path=str(assets))
    return fail("libero.assets",
                f"no LIBERO scene assets at {assets}: LIBERO would try to download them from the "
                "hub inside an env worker", ASSETS_FIX, path=str(assets))


def check_env_step(suite: str, quick: bool, result: dict[str, Any] | None,
                   error: str | None) -> CheckResult:
    """One env of the suite resets and steps (skipped by ``--quick``)."""
    if quick:
        return skip("libero.env", f"{suite}: env reset/step skipped by --quick",
                    "run without --quick to reset and step one env")
    if error is not None:
        return fail("libero.env", f"{suite}: creating, resetting or stepping an env failed: "
                    f"{error}", "fix the rendering and asset checks above first; then run the "
                    "failing step by hand with MUJOCO_GL set as here", suite=suite)
    assert result is not None
    return ok("libero.env",
              f"{suite} '{result['task']}': created in {result['create_s']:.1f} s, reset "
              f"{result['reset_s']:.1f} s, {result['steps']} steps at "
              f"{result['steps_per_s']:.1f}/s (camera {'×'.join(map(str, result['image_shape']))})",
              suite=suite, **result)


def _call(target: Callable[..., dict[str, Any]], timeout: float,
          **kwargs: Any) -> tuple[dict[str, Any] | None, str | None]:
    try:
        return run_probe(target, kwargs, timeout=timeout), None
    except ProbeError as exc:
        return None, str(exc)


def run(ctx: Context) -> list[CheckResult]:
    """Import LIBERO, read its config, look for assets, and (unless quick) step one env."""
    start = time.monotonic()
    imported, error = _call(import_libero, ctx.budget.timeout(60.0))
    results = [guarded("libero.import", check_import, imported, error)
               .timed(time.monotonic() - start)]
    config = read_config()
    results += [guarded("libero.config", check_config, config),
                guarded("libero.assets", check_assets, config)]
    stepped, step_error, seconds = None, None, None
    if not ctx.quick:
        start = time.monotonic()
        stepped, step_error = _call(step_env, ctx.budget.timeout(240.0),
                                    suite=ctx.suite)
        seconds = time.monotonic() - start
    result = guarded("libero.env", check_env_step, ctx.suite, ctx.quick, stepped, step_error)
    results.append(result.timed(seconds) if seconds is not None else result)
    return results
