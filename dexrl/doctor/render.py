"""Check 3, rendering: GL settings, NVIDIA EGL files, and a real offscreen MuJoCo render.

LIBERO renders through robosuite, which uses EGL unless ``MUJOCO_GL`` is ``osmesa`` or ``glx``;
RLinf gives each env worker ``CUDA_VISIBLE_DEVICES`` and ``MUJOCO_EGL_DEVICE_ID`` set to its GPU.
The render probe runs in a child interpreter with exactly those variables, once per visible GPU
(EGL) or once (no GPU, or OSMesa), so device mismatches show up here instead of in a worker.
"""

from __future__ import annotations

import ctypes.util
import glob
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from dexrl.doctor import CheckResult, fail, guarded, ok, skip, warn
from dexrl.doctor.context import Context
from dexrl.subproc import ProbeError, run_probe

# Where libglvnd looks for EGL vendor files when __EGL_VENDOR_LIBRARY_* are unset.
VENDOR_DIRS = ("/etc/glvnd/egl_vendor.d", "/usr/share/glvnd/egl_vendor.d")
SOFTWARE_RENDERERS = ("llvmpipe", "softpipe", "swrast", "software", "lavapipe", "offscreen")
_DISABLED = ("disable", "disabled", "off", "false", "0")
_VALID = ("", "egl", "osmesa", "glx", "glfw", "enable", "enabled", "on", "true", "1")
NVIDIA_EGL_FIX = ("install the driver's EGL libraries (the libnvidia-gl package matching the "
                  "driver; in containers set NVIDIA_DRIVER_CAPABILITIES=all) so that "
                  "/usr/share/glvnd/egl_vendor.d/10_nvidia.json and libEGL_nvidia.so.0 exist")
SCENE = """
<mujoco>
  <worldbody>
    <light pos="0 0 3"/>
    <geom type="plane" size="1 1 .1" rgba=".8 .8 .8 1"/>
    <body pos="0 0 .2"><freejoint/><geom type="box" size=".1 .1 .1" rgba="1 0 0 1"/></body>
    <camera name="front" pos="0 -1 .5" xyaxes="1 0 0 0 .5 1"/>
  </worldbody>
</mujoco>
"""


@dataclass(frozen=True)
class GlSetup:
    """GL-related settings of this process and machine."""

    mujoco_gl: str | None
    pyopengl_platform: str | None
    display: str | None
    vendor_files: tuple[tuple[str, str], ...]  # (file, library_path) per EGL vendor file
    libegl_nvidia: str | None

    @property
    def backend(self) -> str:
        """The backend robosuite picks: ``osmesa``/``glx`` when asked, else EGL."""
        value = (self.mujoco_gl or "").strip().lower()
        return value if value in ("osmesa", "glx") else "egl"


@dataclass(frozen=True)
class RenderAttempt:
    """One offscreen render in a child interpreter."""

    device: str | None
    backend: str
    ok: bool
    seconds: float
    fps: float | None = None
    renderer: str | None = None
    vendor: str | None = None
    error: str | None = None

    @property
    def where(self) -> str:
        return f"GPU {self.device}" if self.device is not None else self.backend

    @property
    def software(self) -> bool:
        return any(s in (self.renderer or "").lower() for s in SOFTWARE_RENDERERS)


def egl_vendor_files(environ: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """(file, library_path) of every EGL vendor file libglvnd would read."""
    env = os.environ if environ is None else environ
    if env.get("__EGL_VENDOR_LIBRARY_FILENAMES"):
        files = env["__EGL_VENDOR_LIBRARY_FILENAMES"].split(":")
    else:
        dirs = (env.get("__EGL_VENDOR_LIBRARY_DIRS") or ":".join(VENDOR_DIRS)).split(":")
        files = sorted(f for d in dirs if d for f in glob.glob(os.path.join(d, "*.json")))
    found = []
    for name in files:
        try:
            lib = json.loads(Path(name).read_text())["ICD"]["library_path"]
        except (OSError, ValueError, KeyError, TypeError):
            lib = "(unreadable)"
        found.append((name, lib))
    return found


def probe_setup() -> GlSetup:
    """Read GL settings, EGL vendor files and whether libEGL_nvidia is installed."""
    return GlSetup(os.environ.get("MUJOCO_GL"), os.environ.get("PYOPENGL_PLATFORM"),
                   os.environ.get("DISPLAY"), tuple(egl_vendor_files()),
                   ctypes.util.find_library("EGL_nvidia"))


def render_frames(size: int = 256, frames: int = 20) -> dict[str, Any]:
    """Child-side probe: open an offscreen MuJoCo context, render, time it, name the renderer."""
    start = time.perf_counter()
    if os.environ.get("MUJOCO_GL", "").lower() == "osmesa" and not ctypes.util.find_library(
            "OSMesa"):
        raise RuntimeError("MUJOCO_GL=osmesa but libOSMesa is not installed")
    import mujoco

    model = mujoco.MjModel.from_xml_string(SCENE)
    data = mujoco.MjData(model)
    renderer = mujoco.Renderer(model, size, size)
    mujoco.mj_forward(model, data)
    renderer.update_scene(data, camera="front")
    renderer.render()
    from OpenGL import GL

    gl_renderer = GL.glGetString(GL.GL_RENDERER)
    gl_vendor = GL.glGetString(GL.GL_VENDOR)
    setup = time.perf_counter() - start
    t0 = time.perf_counter()
    for _ in range(frames):
        mujoco.mj_step(model, data)
        renderer.update_scene(data, camera="front")
        pixels = renderer.render()
    fps = frames / (time.perf_counter() - t0)
    if not pixels.any():
        raise RuntimeError("the render produced an all-black frame")
    return {"setup_s": setup, "fps": fps,
            "renderer": gl_renderer.decode() if gl_renderer else None,
            "vendor": gl_vendor.decode() if gl_vendor else None}


def render_env(backend: str, device: str | None) -> dict[str, str]:
    """Variables a LIBERO env worker renders with (RLinf's, for a worker on ``device``)."""
    env = {"MUJOCO_GL": backend}
    if device is not None:
        env.update(CUDA_VISIBLE_DEVICES=device, MUJOCO_EGL_DEVICE_ID=device)
    return env


def attempt_render(backend: str, device: str | None, timeout: float) -> RenderAttempt:
    """Render once in a child interpreter; failures become an attempt with an error."""
    start = time.monotonic()
    try:
        out = run_probe(render_frames, env=render_env(backend, device),
                        timeout=timeout)
    except ProbeError as exc:
        return RenderAttempt(device, backend, False, time.monotonic() - start, error=str(exc))
    return RenderAttempt(device, backend, True, time.monotonic() - start, out["fps"],
                         out["renderer"], out["vendor"])


def check_backend(s: GlSetup) -> CheckResult:
    """Are ``MUJOCO_GL`` / ``PYOPENGL_PLATFORM`` a combination robosuite can render with?"""
    value = (s.mujoco_gl or "").strip().lower()
    shown = (f"MUJOCO_GL={s.mujoco_gl or '(unset)'}, "
             f"PYOPENGL_PLATFORM={s.pyopengl_platform or '(unset)'}")
    facts = {"MUJOCO_GL": s.mujoco_gl, "PYOPENGL_PLATFORM": s.pyopengl_platform,
             "backend": s.backend}
    if value in _DISABLED:
        return fail("render.backend", f"{shown}: rendering is disabled, LIBERO's cameras need it",
                    "unset MUJOCO_GL (EGL) or set MUJOCO_GL=osmesa", **facts)
    if value not in _VALID:
        return fail("render.backend", f"{shown}: not a MuJoCo GL backend on Linux",
                    "unset MUJOCO_GL (EGL) or set it to egl or osmesa", **facts)
    platform = (s.pyopengl_platform or "").strip().lower()
    if s.backend in ("egl", "osmesa") and platform and platform != s.backend:
        return fail("render.backend",
                    f"{shown}: robosuite renders with {s.backend} and refuses this "
                    "PYOPENGL_PLATFORM", f"unset PYOPENGL_PLATFORM or set it to {s.backend}",
                    **facts)
    if s.backend == "glx" and not s.display:
        return fail("render.backend", f"{shown}: GLX needs an X display and DISPLAY is unset",
                    "unset MUJOCO_GL to render headless with EGL", **facts)
    note = "" if value else " (robosuite's default)"
    return ok("render.backend", f"{shown}: renders with {s.backend}{note}", **facts)


def check_egl_vendor(s: GlSetup, gpus: int) -> CheckResult:
    """With GPUs and EGL, the NVIDIA EGL vendor file and library must be there."""
    vendors = [lib for _, lib in s.vendor_files]
    facts = {"vendor_files": [list(v) for v in s.vendor_files], "libEGL_nvidia": s.libegl_nvidia}
    if s.backend != "egl":
        return skip("render.egl", f"MUJOCO_GL={s.backend} does not use EGL",
                    "unset MUJOCO_GL to render on the GPU with EGL", **facts)
    if gpus == 0:
        return skip("render.egl",
                    f"no NVIDIA GPU: EGL renders with {', '.join(vendors) or 'no vendor'}",
                    "nothing to do without a GPU; on GPU nodes this checks the NVIDIA EGL "
                    "vendor file and libEGL_nvidia", **facts)
    nvidia = [f for f, lib in s.vendor_files if "nvidia" in lib.lower()]
    if not nvidia:
        found = ", ".join(f for f, _ in s.vendor_files) or "none"
        return fail("render.egl",
                    f"no NVIDIA EGL vendor file (found: {found}): EGL falls back to software or "
                    "MuJoCo fails with 'MUJOCO_EGL_DEVICE_ID must be between 0 and 0'",
                    NVIDIA_EGL_FIX, **facts)
    if not s.libegl_nvidia:
        return fail("render.egl", f"{nvidia[0]} is present but libEGL_nvidia is not installed",
                    NVIDIA_EGL_FIX, **facts)
    return ok("render.egl", f"{nvidia[0]} and {s.libegl_nvidia}", **facts)


def check_offscreen(attempts: list[RenderAttempt], gpus: int, quick: bool) -> CheckResult:
    """Did the real renders work, on what renderer, how fast?"""
    facts = {"attempts": [asdict(a) for a in attempts]}
    bad = [a for a in attempts if not a.ok]
    if bad:
        first = bad[0]
        error = first.error or "unknown error"
        if "MUJOCO_EGL_DEVICE_ID" in error:
            fix = f"EGL sees fewer devices than CUDA: {NVIDIA_EGL_FIX}"
        elif first.backend == "osmesa":
            fix = "install OSMesa (e.g. `apt-get install libosmesa6`) or unset MUJOCO_GL for EGL"
        else:
            fix = ("check render.egl above; MUJOCO_GL=osmesa is the software fallback (about "
                   "10× slower)")
        more = f" ({len(bad)} of {len(attempts)} renders failed)" if len(attempts) > 1 else ""
        return fail("render.offscreen", f"{first.where}: {error}{more}", fix, **facts)
    slowest = min(attempts, key=lambda a: a.fps or 0.0)
    where = f"{len(attempts)} GPU(s)" if gpus else attempts[0].backend
    scope = " (--quick: first GPU only)" if quick and gpus > len(attempts) else ""
    head = (f"{where}{scope}: {slowest.renderer} ({slowest.vendor}), {slowest.fps:.0f} "
            "frames/s at 256²")
    soft = [a for a in attempts if a.software]
    if soft:
        fix = (NVIDIA_EGL_FIX if gpus else
               "expected without a GPU; GPU nodes should render with NVIDIA EGL")
        return warn("render.offscreen",
                    f"{head}: a software renderer, about 10× slower than GPU EGL in LIBERO",
                    fix, **facts)
    return ok("render.offscreen", head, **facts)


def run(ctx: Context) -> list[CheckResult]:
    """Probe GL settings and render for real (needs the CUDA facts for the device list)."""
    setup = probe_setup()
    cuda = ctx.facts.get("cuda")
    devices = cuda.device_ids() if cuda is not None and cuda.available else []
    ctx.facts["render"] = {"MUJOCO_GL": setup.mujoco_gl, "backend": setup.backend,
                           "egl_vendor_files": [f for f, _ in setup.vendor_files]}
    results = [guarded("render.backend", check_backend, setup),
               guarded("render.egl", check_egl_vendor, setup, len(devices))]
    targets: list[str | None] = list(devices) if setup.backend == "egl" and devices else [None]
    if ctx.quick:
        targets = targets[:1]
    start = time.monotonic()
    attempts = [attempt_render(setup.backend, d, ctx.budget.timeout(60.0)) for d in targets]
    results.append(guarded("render.offscreen", check_offscreen, attempts, len(devices),
                           ctx.quick).timed(time.monotonic() - start))
    return results
