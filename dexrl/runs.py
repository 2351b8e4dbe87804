"""Run directories: layout, what is written before a launch, and what resume may change.

Layout of ``RUN_DIR``::

    config.yaml            the resolved config handed to RLinf (written once per train/resume)
    manifest.json          versions, git state, checkpoint provenance, command line, hosts,
                           and ``run_dir``: where the folder was created
    logs/                  dexrl's driver log (RLinf's and the workers' output)
    tensorboard/, video/   RLinf's logger and env videos (``runner.logger.log_path`` = RUN_DIR)
    checkpoints/global_step_N/   RLinf checkpoints; complete once the marker file is present

Paths in ``config.yaml`` are absolute. A run folder stays usable after it is moved or copied:
:func:`open_run` re-anchors every path that pointed inside the folder's recorded location
(``manifest.json`` ``run_dir``, else ``runner.logger.log_path``) to where the folder is now, and
resolves the relative model paths that run folders of dexrl 0.1 recorded against ``train``'s
working directory (``manifest.json`` ``cwd``).
"""

from __future__ import annotations

import fnmatch
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from dexrl import durable
from dexrl.checks import Finding
from dexrl.config import flatten
from dexrl.errors import DexrlError
from dexrl.versions import installed_versions

CONFIG_FILE = "config.yaml"
MANIFEST_FILE = "manifest.json"
WANDB_ID_FILE = "wandb_run_id"
CHECKPOINTS = "checkpoints"
MARKER = "dexrl_complete.json"  # written last, after RLinf's save returned
LOG_FILE = Path("logs") / "driver.log"

# Keys a resume may change without --allow-changes: they do not change the experiment.
SAFE_RESUME_KEYS = (
    "runner.max_steps",
    "runner.max_epochs",
    "runner.save_interval",
    "runner.val_check_interval",
    "runner.resume_dir",
    "runner.logger.*",
    "env.*.video_cfg.*",
    "cluster.*",
    "actor.enable_offload",
    "rollout.enable_offload",
    "env.enable_offload",
)


# Fields that place what RLinf writes: dexrl sets them so that everything lands in RUN_DIR, and
# refuses a user's override with the reason (RLinf writes checkpoints to
# <log_path>/<experiment_name>/checkpoints; tensorboard and videos follow log_path).
OWNED_KEYS = {
    "runner.logger.log_path": "it is the run folder; choose it with --run-dir (or --name)",
    "runner.logger.experiment_name": "it would move the checkpoints out of RUN_DIR/checkpoints "
                                     "(RLinf writes them to <log_path>/<experiment_name>); name "
                                     "the run with --name",
    "runner.resume_dir": "`dexrl resume RUN_DIR` sets it (--step N picks the checkpoint)",
}
# Path-valued keys that dexrl 0.1 could record relative to the working directory of `train`.
MODEL_PATH_KEYS = ("actor.model.model_path", "rollout.model.model_path")


def default_run_dir(suite: str, model: str, name: str | None = None, root: str = "runs") -> Path:
    """``runs/<name>`` or ``runs/<suite>_<model>_<timestamp>``."""
    if name is not None and (not name.strip() or name in (".", "..") or "/" in name
                             or os.sep in name):
        raise DexrlError(f"--name {name!r} is not a folder name",
                         "give a plain name (runs/<name> is created), or a path with --run-dir",
                         where="--name")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path(root) / (name or f"{suite}_{model}_{stamp}")


def check_new_run_dir(path: Path) -> None:
    """Refuse a run directory that already holds something (resume is the way to continue)."""
    if path.exists() and not path.is_dir():
        raise DexrlError("the run directory path is a file", "choose another --run-dir",
                         where=str(path))
    if path.is_dir() and any(path.iterdir()):
        what = "another run" if (path / CONFIG_FILE).exists() else "files"
        raise DexrlError(f"the run directory already holds {what}",
                         f"continue it with `dexrl resume {path}`, or choose another --run-dir",
                         where=str(path))


def git_state(cwd: Path | None = None) -> dict[str, Any] | None:
    """Commit and dirtiness of the git work tree dexrl runs from, if any."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                              timeout=5, check=True).stdout.strip()
    try:
        return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain"))}
    except (OSError, subprocess.SubprocessError):
        return None


def checkpoint_provenance(model_path: str | None) -> dict[str, Any] | None:
    """The ``dexrl download`` manifest of the checkpoint, when there is one."""
    if not model_path:
        return None
    path = Path(model_path) / "dexrl-checkpoint.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {"path": str(model_path), "manifest": None}


def resolved(cfg: DictConfig) -> DictConfig:
    """A copy with every interpolation resolved: a run must not change with the environment."""
    try:
        return OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    except Exception as exc:
        raise DexrlError(f"config does not resolve: {' '.join(str(exc).split())}",
                         "fix the interpolation or the override that feeds it") from None


def _override_key(override: str) -> str:
    """The key of ``key=value``, ``+key=value`` or ``~key``."""
    return override.partition("=")[0].lstrip("+~")


def owned_override_findings(overrides: list[str], fix: str = "") -> list[Finding]:
    """An error per user override of a field dexrl owns (:data:`OWNED_KEYS`), with the reason.

    The one check behind ``train`` and ``validate`` (:func:`dexrl.config.compose_and_check`) and
    ``resume``.
    """
    found = []
    for item in overrides:
        key = _override_key(item)
        if key in OWNED_KEYS:
            found.append(Finding("error", "overrides", f"{key} is set by dexrl: {OWNED_KEYS[key]}",
                                 f"drop the override {item!r}" + (f"; {fix}" if fix else "")))
    return found


def without_owned(overrides: list[str]) -> list[str]:
    """``overrides`` less those of owned fields (dexrl sets those fields itself)."""
    return [o for o in overrides if _override_key(o) not in OWNED_KEYS]


def refuse_owned_overrides(overrides: list[str], fix: str) -> None:
    """Raise the first of :func:`owned_override_findings` as a DexrlError."""
    found = owned_override_findings(overrides, fix)
    if found:
        raise DexrlError(found[0].message, found[0].hint, where=found[0].where)


def run_folder_settings(run_dir: Path, resume_from: Path | None = None) -> dict[str, Any]:
    """The owned fields for a run in ``run_dir`` (absolute), continuing from ``resume_from``."""
    return {"runner.logger.log_path": os.path.abspath(run_dir),
            "runner.logger.experiment_name": "",
            "runner.resume_dir": os.path.abspath(resume_from) if resume_from else None}


def set_run_folder(cfg: DictConfig, run_dir: Path,
                   resume_from: Path | None = None) -> dict[str, Any]:
    """Point RLinf's outputs at ``run_dir``, in ``cfg`` itself, before it is resolved.

    Interpolations that follow ``runner.logger.log_path`` (the env video folders) land in the
    run folder too. Returns the fields set, for ``--dry-run`` and ``resume``'s diff.
    """
    settings = run_folder_settings(run_dir, resume_from)
    with open_dict(cfg):
        for key, value in settings.items():
            OmegaConf.update(cfg, key, value, force_add=True)
    return settings


def render_settings(settings: dict[str, Any]) -> list[str]:
    """``key=value`` lines, values as YAML writes them (``null``, ``''``)."""
    return [f"{k}={OmegaConf.to_yaml({'v': v}).strip().removeprefix('v: ')}"
            for k, v in settings.items()]


def check_run_folder(cfg: DictConfig, run_dir: Path, resume_from: Path | None) -> None:
    """Raise RuntimeError when ``cfg`` was not prepared by :func:`set_run_folder` for this run."""
    for key, value in run_folder_settings(run_dir, resume_from).items():
        if OmegaConf.select(cfg, key) != value:
            raise RuntimeError(f"{key} is not {value!r}: call dexrl.runs.set_run_folder() "
                               "before launch()")


def save_config(run_dir: Path, cfg: DictConfig) -> None:
    """Write ``config.yaml`` (resolved) durably: what RLinf runs with, what resume reads."""
    durable.write_text(Path(run_dir) / CONFIG_FILE, OmegaConf.to_yaml(cfg, resolve=True))


def write_run_files(run_dir: Path, cfg: DictConfig, argv: list[str],
                    extra: dict[str, Any] | None = None) -> None:
    """Write ``config.yaml`` (resolved) and ``manifest.json`` into a new run directory."""
    run_dir.mkdir(parents=True, exist_ok=True)
    save_config(run_dir, cfg)
    manifest = {
        "schema": 1,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "run_dir": os.path.abspath(run_dir),
        "command": argv,
        "cwd": os.getcwd(),
        "host": socket.gethostname(),
        "python": sys.executable,
        "versions": installed_versions(),
        "git": git_state(),
        "checkpoint": checkpoint_provenance(OmegaConf.select(cfg, "actor.model.model_path")),
        **(extra or {}),
    }
    durable.write_json(run_dir / MANIFEST_FILE, manifest)


def read_manifest(run_dir: Path) -> dict[str, Any]:
    """The run's ``manifest.json`` ({} when missing or unreadable)."""
    try:
        data = json.loads((Path(run_dir) / MANIFEST_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def use_wandb_run_id(run_dir: Path) -> str:
    """Give the run one W&B run id, kept in the run folder, so a resume continues that run."""
    path = Path(run_dir) / WANDB_ID_FILE
    if path.is_file():
        run_id = path.read_text().strip()
    else:
        run_id = uuid.uuid4().hex[:12]
        durable.write_text(path, run_id + "\n")
    os.environ["WANDB_RUN_ID"] = run_id
    os.environ.setdefault("WANDB_RESUME", "allow")
    return run_id


def load_run_config(run_dir: Path) -> DictConfig:
    """The saved config of a run as written (see :func:`open_run` for one that was moved)."""
    path = Path(run_dir) / CONFIG_FILE
    if not path.is_file():
        raise DexrlError("not a dexrl run directory (no config.yaml)",
                         "pass the folder `dexrl train` created (e.g. runs/<name>)",
                         where=str(run_dir))
    try:
        cfg = OmegaConf.load(path)
    except Exception as exc:
        raise DexrlError(f"unreadable config.yaml ({' '.join(str(exc).split())})",
                         "restore the file from a backup", where=str(path)) from None
    if not isinstance(cfg, DictConfig):
        raise DexrlError("config.yaml is not a mapping", "restore the file", where=str(path))
    return cfg


@dataclass(frozen=True)
class Run:
    """An opened run folder.

    Attributes:
        dir: Where the folder is now (absolute).
        config: Its saved config, paths re-anchored to ``dir``.
        manifest: Its ``manifest.json`` ({} when missing).
        moved_from: The folder's recorded location when it is not ``dir`` (moved or copied).
    """

    dir: Path
    config: DictConfig
    manifest: dict[str, Any]
    moved_from: Path | None


def open_run(path: str | Path) -> Run:
    """Open a run folder from any working directory, also after it was moved or copied.

    The one resolver for commands that read a run (resume, eval, export, plot).

    Raises:
        DexrlError: the path does not exist, is a file, or is not a dexrl run folder.
    """
    given = Path(path).expanduser()
    run_dir = Path(os.path.abspath(given))  # normalizes "..", keeps symlinks as the user named them
    hint = "pass the folder `dexrl train` created (it holds config.yaml and manifest.json)"
    if not run_dir.exists():
        raise DexrlError("run folder does not exist", hint, where=str(given))
    if not run_dir.is_dir():
        raise DexrlError("a file, not a run folder", hint, where=str(given))
    step = checkpoint_step(run_dir)
    if step is not None and run_dir.parent.name == CHECKPOINTS:
        raise DexrlError("a checkpoint folder, not a run folder",
                         f"pass the run folder {run_dir.parent.parent} (with --step {step} where "
                         "the command has it)", where=str(given))
    cfg = load_run_config(run_dir)
    manifest = read_manifest(run_dir)
    cfg, moved_from = _relocate(cfg, run_dir, manifest)
    return Run(run_dir, cfg, manifest, moved_from)


def _relocate(cfg: DictConfig, run_dir: Path,
              manifest: dict[str, Any]) -> tuple[DictConfig, Path | None]:
    """Re-anchor the paths of a run folder that now lives at ``run_dir`` (see module doc)."""
    data = OmegaConf.to_container(cfg, resolve=False)
    cwd = manifest.get("cwd")
    for key in MODEL_PATH_KEYS:
        *parents, leaf = key.split(".")
        node = data
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        value = node.get(leaf) if isinstance(node, dict) else None
        if isinstance(value, str) and value and "${" not in value and isinstance(cwd, str) \
                and not Path(value).expanduser().is_absolute():
            node[leaf] = os.path.normpath(Path(cwd) / value)
    # Where the folder last ran (config) and where it was created (manifest).
    recorded = [OmegaConf.select(cfg, "runner.logger.log_path", default=None,
                                 throw_on_resolution_failure=False), manifest.get("run_dir")]
    moved_from = None
    for old in dict.fromkeys(r for r in recorded if isinstance(r, str) and os.path.isabs(r)):
        if Path(old) != run_dir:
            data = _rebase(data, old.rstrip(os.sep), str(run_dir))
            moved_from = moved_from or Path(old)
    return OmegaConf.create(data), moved_from


def _rebase(node: Any, old: str, new: str) -> Any:
    """Every string equal to ``old`` or below it, moved to ``new``."""
    if isinstance(node, dict):
        return {k: _rebase(v, old, new) for k, v in node.items()}
    if isinstance(node, list):
        return [_rebase(v, old, new) for v in node]
    if isinstance(node, str) and (node == old or node.startswith(old + os.sep)):
        return new + node[len(old):]
    return node


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint folder of a run.

    Attributes:
        step: N of ``global_step_N``.
        path: The folder.
        problem: Why it is incomplete (see :func:`marker_problem`); None when it is complete.
    """

    step: int
    path: Path
    problem: str | None

    @property
    def complete(self) -> bool:
        """Fully written: its completion marker is valid and names its step."""
        return self.problem is None


def checkpoints_dir(run_dir: Path) -> Path:
    """Where a run's checkpoints live: ``<run_dir>/checkpoints``."""
    return Path(run_dir) / CHECKPOINTS


def marker_problem(checkpoint: Path) -> str | None:
    """Why the :data:`MARKER` of ``checkpoint`` (``.../global_step_N``) does not vouch for it.

    A marker vouches when it is a JSON object with ``step`` (an integer equal to the folder's N)
    and ``written`` (a time stamp), as :func:`mark_complete` writes it. None when it vouches.
    """
    path = Path(checkpoint) / MARKER
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return f"interrupted save, no {MARKER}"
    except (OSError, UnicodeDecodeError) as exc:
        return f"{MARKER} cannot be read: {exc}"
    try:
        data = json.loads(text)
    except ValueError:
        return f"{MARKER} is " + ("empty" if not text.strip() else "not valid JSON")
    step = data.get("step") if isinstance(data, dict) else None
    if not isinstance(step, int) or isinstance(step, bool) \
            or not isinstance(data.get("written"), str):
        return f"{MARKER} lacks its fields (an integer step and a written time)"
    if step != checkpoint_step(Path(checkpoint)):
        return f"{MARKER} names step {step}, not {checkpoint_step(Path(checkpoint))}"
    return None


def is_complete(checkpoint: Path) -> bool:
    """Whether ``checkpoint`` (``.../global_step_N``) was fully written (:func:`marker_problem`)."""
    return marker_problem(checkpoint) is None


def checkpoint_step(checkpoint: Path) -> int | None:
    """N of a ``global_step_N`` folder, else None."""
    suffix = Path(checkpoint).name.removeprefix("global_step_")
    return int(suffix) if Path(checkpoint).name.startswith("global_step_") and suffix.isdigit() \
        else None


def checkpoints(run_dir: Path) -> list[Checkpoint]:
    """Every ``global_step_N`` folder of a run, by step."""
    root = checkpoints_dir(run_dir)
    found = []
    for p in root.glob("global_step_*") if root.is_dir() else []:
        step = checkpoint_step(p)
        if p.is_dir() and step is not None:
            found.append(Checkpoint(step, p, marker_problem(p)))
    return sorted(found, key=lambda c: c.step)


def pick_checkpoint(run_dir: Path, step: int | None = None,
                    purpose: str = "resume from") -> Checkpoint:
    """The latest complete checkpoint, or the one at ``step``; DexrlError otherwise.

    The one rule for resume, eval and export: an incomplete checkpoint (an interrupted save, a
    marker that does not vouch for it) is never used; :func:`skipped` names the ones passed over.
    """
    all_ckpts = checkpoints(run_dir)
    complete = [c for c in all_ckpts if c.complete]
    if step is not None:
        match = [c for c in all_ckpts if c.step == step]
        if not match:
            have = ", ".join(str(c.step) for c in complete) or "none"
            raise DexrlError(f"no checkpoint at step {step}",
                             f"complete checkpoints: {have}", where=str(run_dir))
        if not match[0].complete:
            have = ", ".join(str(c.step) for c in complete) or "none"
            raise DexrlError(f"the checkpoint at step {step} is incomplete ({match[0].problem})",
                             f"use a complete step ({have}), or give the run folder without a "
                             "step to take the latest complete one", where=str(match[0].path))
        return match[0]
    if not complete:
        partial = f" ({len(all_ckpts)} incomplete)" if all_ckpts else ""
        raise DexrlError(f"no complete checkpoint to {purpose}{partial}",
                         "train first; a checkpoint is written every runner.save_interval steps "
                         "and counts only once it finished writing",
                         where=str(checkpoints_dir(run_dir)), details=skipped(run_dir))
    return complete[-1]


def skipped(run_dir: Path, chosen: Checkpoint | None = None) -> list[str]:
    """Notes on the incomplete checkpoints newer than ``chosen`` (passed over, never used), each
    with why; without ``chosen``, those newer than the latest complete one."""
    found = checkpoints(run_dir)
    last = chosen.step if chosen else max((c.step for c in found if c.complete), default=-1)
    using = f"; using {chosen.path.name}" if chosen else ""
    return [f"note: {c.path.name} is incomplete ({c.problem}){using}"
            for c in found if not c.complete and c.step > last]


def mark_complete(checkpoint: Path, step: int) -> Path:
    """Vouch for a finished checkpoint folder: make it durable, then write the marker (last).

    The checkpoint's files are fsynced first, so that after a power loss a marker never
    survives the files it vouches for.
    """
    durable.sync_tree(checkpoint)
    return durable.write_json(Path(checkpoint) / MARKER,
                              {"step": step, "written": time.strftime("%Y-%m-%dT%H:%M:%S")})


def latest_checkpoint(run_dir: Path) -> Path:
    """The complete checkpoint with the highest step (incomplete ones are skipped)."""
    return pick_checkpoint(run_dir).path


def planned_steps(cfg: DictConfig) -> int:
    """The step a run stops at: RLinf caps runner.max_steps by runner.max_epochs (1 step each)."""
    epochs = int(OmegaConf.select(cfg, "runner.max_epochs", default=1))
    max_steps = int(OmegaConf.select(cfg, "runner.max_steps", default=-1))
    return min(epochs, max_steps) if max_steps >= 0 else epochs


def check_steps_left(cfg: DictConfig, step: int, run_dir: Path | None = None) -> int:
    """The step the run stops at; refuses a start at or past it (nothing would be trained)."""
    total = planned_steps(cfg)
    if step >= total:
        example = (f", e.g. `dexrl resume {run_dir} runner.max_steps={step + 1}`"
                   if run_dir is not None else "")
        raise DexrlError(f"the run already reached step {step} of {total}",
                         f"raise runner.max_steps (and runner.max_epochs) above {step}{example}")
    return total


ABSENT = object()  # a key one side of a config_diff does not have


def config_diff(old: DictConfig, new: DictConfig) -> list[tuple[str, Any, Any]]:
    """(key, old, new) for every leaf that differs between two configs (:data:`ABSENT` if none)."""
    a = flatten(OmegaConf.to_container(old, resolve=True))
    b = flatten(OmegaConf.to_container(new, resolve=True))
    return [(k, a.get(k, ABSENT), b.get(k, ABSENT)) for k in sorted(a.keys() | b.keys())
            if a.get(k, ABSENT) != b.get(k, ABSENT)]


def unsafe_changes(diff: list[tuple[str, Any, Any]]) -> list[tuple[str, Any, Any]]:
    """The changes that alter the experiment (anything outside SAFE_RESUME_KEYS)."""
    return [d for d in diff if not any(fnmatch.fnmatchcase(d[0], pat) for pat in SAFE_RESUME_KEYS)]
