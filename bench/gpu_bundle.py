"""Pack what a bare, offline CUDA machine needs to run dexrl's whole pipeline into one .tar.xz.

Run by hand, here (PyPI reachable), from the repository root::

    .venv/bin/python bench/gpu_bundle.py .gpu/site.tar.xz --python-version 3.12

The target is assumed to hold Python, torch (and what torch requires) and numpy, nothing else
(the device tool's machines: docs/performance.md#running-on-a-bare-gpu-machine). The bundle is
the import closure of real runs, recorded here: each ``--record`` command (by default a
synchronous and an async ``dexrl train --suite reach_cued --model pi0 --smoke`` of one step,
DM0's synchronous one and ``bench/random_pi0.py --tiny``) runs with a hook that logs every
module imported, in the driver, the Ray daemons and every worker (they all inherit
``PYTHONPATH``). Imported modules are mapped to their distributions; a distribution with
compiled files is fetched as the target's wheel (``pip download --only-binary=:all:
--python-version``), a pure one is copied from this environment with its metadata. The
subpackages of Ray and of ``transformers.models`` that nothing imported are left out, and Ray's
Java jars (Ray's dashboard is kept: without its ``client/build`` Ray waits about 60 s at
start-up), and the binaries' symbol tables (``strip``). dexrl itself is not packed: it travels
as the working tree.

On the target: unpack into a folder, ``python3 -m compileall -q -j 16`` it, and put it first
on ``PYTHONPATH`` with the repository (and ``conf/`` copied to ``dexrl/conf``).
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
    "{python} bench/random_pi0.py {tmp}/tiny --tiny",
]
TARGET_HAS = {"torch", "numpy"}  # and what torch requires, found from its metadata
# Left out by default: triton comes with the target's CUDA torch (this CPU torch does not require
# it); pyarrow and scipy are imported by training only where present (Ray's arrow serializer,
# transformers' object-detection losses) and would add about 60 MB. `dexrl eval`'s statistics need
# scipy: for an eval there, pass `--exclude triton pyarrow` and record an eval too.
EXCLUDE = ("triton", "pyarrow", "scipy")
PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64")
RAY_KEEP_ALWAYS = {"dashboard", "_private", "_raylet", "core", "util", "experimental",
                   "autoscaler", "_common", "runtime_env", "includes", "thirdparty_files",
                   "scripts", "job_submission"}


def record(commands: list[str], log: Path) -> set[str]:
    """Module names imported by ``commands``, each run with the recording hook."""
    hook_dir = Path(tempfile.mkdtemp(prefix="hook-"))
    (hook_dir / "sitecustomize.py").write_text(HOOK)
    run_tmp = tempfile.mkdtemp(prefix="bundle-runs-")
    env = {**os.environ, "DEXRL_IMPORT_LOG": str(log), "PYTHONPATH": os.pathsep.join(
        [str(hook_dir), str(Path.cwd()), os.environ.get("PYTHONPATH", "")])}
    dexrl = str(Path(sys.executable).parent / "dexrl")
    for template in commands:
        cmd = template.format(dexrl=dexrl, python=sys.executable, tmp=run_tmp)
        print(f"recording: {cmd}", flush=True)
        subprocess.run(cmd, shell=True, env=env, check=True, stdout=subprocess.DEVNULL)
    return {line.strip() for line in log.read_text().splitlines() if line.strip()}


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


def copy_pure(dist: md.Distribution, stage: Path) -> None:
    """Copy ``dist``'s installed files (sources and metadata, no bytecode) into ``stage``."""
    for file in dist.files or []:
        rel = Path(str(file))
        if rel.parts[0] == ".." or rel.suffix == ".pyc" or "__pycache__" in rel.parts:
            continue
        src = Path(dist.locate_file(file))
        if src.is_file():
            (stage / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, stage / rel)


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
    for name, dist in sorted(distributions(modules, args.exclude).items()):
        how = "wheel" if compiled(dist) else "copy"
        print(f"{how:5} {name}=={dist.version}", flush=True)
        if how == "wheel":
            fetch_wheel(dist, args.python_version, wheels, stage)
        else:
            copy_pure(dist, stage)
    prune(stage, "ray", modules, RAY_KEEP_ALWAYS)
    shutil.rmtree(stage / "ray" / "jars", ignore_errors=True)
    prune(stage, "transformers.models", modules)
    strip_binaries(stage)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(args.out, "w:xz", preset=6) as tar:
        tar.add(stage, arcname=".")
    print(f"wrote {args.out}: {args.out.stat().st_size / 2**20:.1f} MiB", flush=True)


if __name__ == "__main__":
    main()
