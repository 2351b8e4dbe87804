"""What checkpoint a path is, answered in one place and one pass down.

:func:`locate_checkpoint` turns what ``--ckpt`` names into a folder (a local path, or a hub repo id
with a verified ``dexrl download``); :func:`resolve_checkpoint` classifies a path once and returns
one :class:`CheckpointSource` describing it:

- ``dexbotic``: a Dexbotic checkpoint folder (``config.json`` + safetensors + tokenizer + norm
  stats), e.g. a download;
- ``export``: a Dexbotic checkpoint folder written by ``dexrl export`` (``dexrl-export.json``);
- ``run``: a dexrl run folder, its latest complete ``checkpoints/global_step_N`` (the rule resume
  uses), from any working directory and after the folder moved;
- ``step``: an RLinf ``global_step_N`` folder;
- ``weights``: a step's ``actor/model_state_dict/full_weights.pt`` (or a loose copy of it).

Design notes: docs/design/evaluation.md.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dexrl.checkpoints.files.guard import check_intact
from dexrl.checkpoints.files.layout import read_json
from dexrl.checkpoints.files.steps import Checkpoint, checkpoint_at, pick_checkpoint, skipped
from dexrl.checkpoints.verify import checkpoint_model_type
from dexrl.config.run_paths import open_run, recorded_model_path, training_facts
from dexrl.config.settings import Settings
from dexrl.errors import DexrlError
from dexrl.hub.home import check_repo_id, checkpoint_dir
from dexrl.hub.manifest import read_download_manifest
from dexrl.runs.layout import (
    CONFIG_FILE,
    WEIGHTS_IN_STEP,
    checkpoint_step,
    run_of_step,
    step_of_weights,
)
from dexrl.runs.record import read_manifest

EXPORT_MANIFEST = "dexrl-export.json"
RLINF_KINDS = ("run", "step", "weights")  # training weights of an RLinf run
KINDS = ("dexbotic", "export", *RLINF_KINDS)


@dataclass(frozen=True)
class TrainingInfo:
    """What the checkpoint's training run used, when known.

    Attributes:
        suite: LIBERO suite or dexrl task trained on.
        num_action_chunks: Actions executed per policy call in training.
        num_steps: Denoising steps in training.
        init_params: LIBERO env ``init_params`` (camera sizes) of the run.
        source: The file these values were read from.
        task: A dexrl task's own section of the training env config (targets, cues).
    """

    suite: str | None
    num_action_chunks: int | None
    num_steps: int | None
    init_params: dict[str, Any] | None
    source: str
    task: dict[str, Any] | None = None


@dataclass(frozen=True)
class CheckpointSource:
    """A resolved checkpoint path: what it is and everything needed to load it.

    Attributes:
        kind: What the path is, one of :data:`KINDS` (see the module docstring).
        path: What the user passed, resolved.
        model_dir: The Dexbotic-layout directory with config, tokenizer, preprocessor, norm stats
            (for RLinf weights: the base checkpoint).
        model_type: ``config.json`` model_type of ``model_dir``.
        weights: ``full_weights.pt`` (RLinf weights only).
        run_dir: The RLinf run (RLinf weights only).
        step: The global step (RLinf weights only).
        base_from: How ``model_dir`` was found (RLinf weights only).
        training: The training run's settings, when known.
        provenance: Download manifest and/or export manifest of ``model_dir``.
        notes: What the user should know about how it was found (skipped incomplete steps, a
            moved run folder).
    """

    kind: str
    path: Path
    model_dir: Path
    model_type: str
    weights: Path | None = None
    run_dir: Path | None = None
    step: int | None = None
    base_from: str | None = None
    training: TrainingInfo | None = None
    provenance: dict[str, Any] = dataclasses.field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def form(self) -> str:
        """``dexbotic`` (a checkpoint folder) or ``rlinf`` (training weights of a run)."""
        return "rlinf" if self.kind in RLINF_KINDS else "dexbotic"

    def describe(self) -> dict[str, Any]:
        """JSON-ready record for results.json and export manifests."""
        record = dataclasses.asdict(self)
        record.pop("kind")
        record.pop("notes")
        return {k: str(v) if isinstance(v, Path) else v
                for k, v in {"form": self.form, **record}.items()}


def locate_checkpoint(ckpt: str) -> Path:
    """The folder ``--ckpt`` names: a checkpoint path, or a hub repo id with a verified
    ``dexrl download``.

    The rule (docs/cli.md, "Checkpoint paths and repo ids"): what exists here is a path; else
    an ``owner/name`` repo id with a verified download is that download; else a value that looks
    like a path (:func:`looks_like_path`) does not exist, and any other is a repo id not
    downloaded yet. A downloaded repo id is never misread as a path.

    Raises:
        DexrlError: nothing at the path, and no verified download of it as a repo id.
    """
    path = Path(ckpt).expanduser()
    if path.exists():
        return path.resolve()
    repo_id = _repo_id_form(ckpt)
    local = checkpoint_dir(ckpt) if repo_id else None
    if local is not None:
        manifest = read_download_manifest(local) if local.is_dir() else None
        if manifest is not None and manifest.verified:
            return local
    if not repo_id or looks_like_path(ckpt):
        raise DexrlError(f"checkpoint path does not exist: {ckpt}", missing_path_hint(path),
                         where="--ckpt", code="checkpoint-not-found")
    close = _closest(path)[2]  # `rusn/x` for runs/x: a typo of a local folder
    raise DexrlError(f"checkpoint '{ckpt}' has no verified download in {local}",
                     f"run `dexrl download {ckpt}` first, or pass a local path"
                     + (f" (the closest here: {close})" if close else ""),
                     where="--ckpt", code="hub-not-downloaded")


def _repo_id_form(value: str) -> bool:
    """``owner/name`` the hub would accept: one ``/``, not at either end, no leading ``.``/``~``."""
    if value.count("/") != 1 or value.startswith((".", "/", "~")) or value.endswith("/"):
        return False
    try:
        check_repo_id(value)
    except DexrlError:
        return False
    return True


def looks_like_path(value: str) -> bool:
    """A ``--ckpt`` value that names a local path, not a hub repo id, when nothing is there: it
    starts with ``/``, ``./``, ``../`` or ``~``, ends with ``/``, has no ``/`` or more than
    one, or its first part is a folder here (``runs/nope`` where ``runs/`` exists)."""
    if value.startswith(("/", "./", "../", "~")) or value.endswith("/") or value.count("/") != 1:
        return True
    return Path(value.split("/", 1)[0]).is_dir()


def _closest(path: Path) -> tuple[Path, Path, Path | None]:
    """(the first part of ``path`` that does not exist, the folder it would be in, ``path``
    with that part replaced by the closest name in that folder, if one is close)."""
    import difflib
    import itertools
    import os

    first_missing = path
    while not first_missing.parent.exists() and first_missing.parent != first_missing:
        first_missing = first_missing.parent
    folder = first_missing.parent
    try:
        with os.scandir(folder) as entries:  # a huge folder: its first names only
            names = [e.name for e in itertools.islice(entries, 5000)]
    except OSError:
        names = []
    started = [n for n in names if n.startswith(first_missing.name)]  # a name cut short
    close = started if len(started) == 1 else difflib.get_close_matches(
        first_missing.name, names, n=1, cutoff=0.6)
    return (first_missing, folder,
            folder / close[0] / path.relative_to(first_missing) if close else None)


def missing_path_hint(path: Path) -> str:
    """How to fix a path that does not exist: the first part of it that is missing, the folder
    to list, and the closest name there (when one is close)."""
    path = Path(path)
    first_missing, folder, close = _closest(path)
    shown = "." if str(folder) == "." else str(folder).rstrip("/") + "/"
    fix = f"check the spelling (`ls {shown}` lists what is there)"
    if first_missing != path:
        fix = f"{first_missing} does not exist either; " + fix
    return fix + (f"; the closest there: {close}" if close else "")


def checkpoint_kind(path: Path) -> str:
    """Which of :data:`KINDS` the existing ``path`` is, from its files alone.

    Raises:
        DexrlError: nothing at ``path``, or none of the kinds.
    """
    if not path.exists():
        raise DexrlError("checkpoint path does not exist", missing_path_hint(path) + "; pass a "
                         "Dexbotic checkpoint folder, an RLinf run folder, a global_step_N folder "
                         "or its full_weights.pt", where=str(path), code="checkpoint-not-found")
    if path.is_file():
        return "weights"
    if (path / "config.json").is_file():
        return "export" if (path / EXPORT_MANIFEST).is_file() else "dexbotic"
    if (path / WEIGHTS_IN_STEP).is_file():
        return "step"
    if (path / CONFIG_FILE).is_file():
        return "run"
    raise DexrlError("not a checkpoint: no config.json, no actor/model_state_dict/"
                     "full_weights.pt and no RLinf run (config.yaml + checkpoints/)",
                     "pass a Dexbotic checkpoint folder, an RLinf run folder, a global_step_N "
                     "folder or its full_weights.pt", where=str(path),
                     code="checkpoint-unrecognized")


def resolve_checkpoint(path: str | Path, base: str | Path | None = None) -> CheckpointSource:
    """Classify ``path`` once and work out everything needed to load it.

    Args:
        path: See the module docstring for the accepted kinds.
        base: The base checkpoint of RLinf weights (default: from the run's config).

    Raises:
        DexrlError: nothing usable at ``path``, or the base checkpoint cannot be found.
    """
    path = Path(path).expanduser().resolve()
    kind = checkpoint_kind(path)
    if kind in ("dexbotic", "export"):
        return _dexbotic_source(kind, path)
    if kind == "weights":
        return _rlinf_source(kind, path, path, step_of_weights(path), base)
    if kind == "step":
        return _rlinf_source(kind, path, path / WEIGHTS_IN_STEP, path, base)
    return _run_source(path, base)


def _run_source(path: Path, base: str | Path | None) -> CheckpointSource:
    """A run folder: its latest complete step, picked as resume picks it."""
    run = open_run(path)
    chosen = pick_checkpoint(run.dir, purpose="use")
    step_dir = chosen.path
    checked = check_intact(run.dir, chosen, _use)  # a missing file is damage where listed
    if not (step_dir / WEIGHTS_IN_STEP).is_file():
        raise DexrlError(f"the run's latest complete checkpoint {step_dir.name} has no full "
                         f"weights ({WEIGHTS_IN_STEP})",
                         "pass another step's folder (checkpoints/global_step_N)",
                         where=str(step_dir), code="checkpoint-no-full-weights")
    notes = checked + skipped(run.dir, chosen) + ([f"note: the run folder was at "
                                                   f"{run.moved_from}; its paths now point "
                                                   f"into {run.dir}"] if run.moved_from else [])
    return _rlinf_source("run", path, step_dir / WEIGHTS_IN_STEP, step_dir, base,
                         run_config=run.config, notes=tuple(notes))


def _use(good: Checkpoint) -> str:
    """How eval and export use another step of a run (the hint of a damaged one)."""
    suite = read_manifest(run_of_step(good.path)).get("suite") or "SUITE"
    return (f"dexrl eval --ckpt {good.path} --suite {suite}` or `dexrl export {good.path} "
            "--out DIR")


def _dexbotic_source(kind: str, path: Path) -> CheckpointSource:
    provenance = {}
    training = None
    if kind == "export":
        export = path / EXPORT_MANIFEST
        provenance["export"] = _read_json(export)
        if provenance["export"].get("training"):
            training = TrainingInfo(**{**provenance["export"]["training"], "source": str(export)})
    download = _download_manifest(path)
    if download is not None:
        provenance["download"] = download
    return CheckpointSource(kind, path, path, checkpoint_model_type(path), training=training,
                            provenance=provenance)


def _rlinf_source(kind: str, given: Path, weights: Path, step_dir: Path | None,
                  base: str | Path | None, *, run_config: Any = None,
                  notes: tuple[str, ...] = ()) -> CheckpointSource:
    """RLinf weights: the run's config (already opened for a run folder) names the base."""
    if weights.suffix not in (".pt", ".pth", ".bin"):
        raise DexrlError("not a checkpoint file (expected RLinf's full_weights.pt)",
                         "pass a Dexbotic checkpoint folder or an RLinf global_step_N folder",
                         where=str(weights), code="checkpoint-not-weights-file")
    run_dir = run_of_step(step_dir) if step_dir is not None else None
    cfg = run_config
    if cfg is None and run_dir is not None and (run_dir / CONFIG_FILE).is_file():
        checkpoint = checkpoint_at(step_dir)
        if not checkpoint.complete:
            pick_checkpoint(run_dir, checkpoint.step)  # raises: incomplete
        notes = (*notes, *check_intact(run_dir, checkpoint, _use))
        cfg = open_run(run_dir).config
    if base is not None:
        model_dir, base_from = Path(base).expanduser().resolve(), "--base"
    elif cfg is not None:
        model_dir, base_from = _base_from_config(cfg, run_dir), f"{run_dir}/config.yaml"
    else:
        raise DexrlError("cannot find the base checkpoint of these training weights (no run "
                         "config.yaml two levels above global_step_N)",
                         "pass the checkpoint the run started from with --base",
                         where=str(weights), code="base-not-found")
    if not (model_dir / "config.json").is_file():
        raise DexrlError(f"the base checkpoint (from {base_from}) has no config.json",
                         "pass the checkpoint the run started from with --base",
                         where=str(model_dir), code="base-no-config")
    model_type = checkpoint_model_type(model_dir)
    trained_type = Settings.read(cfg).actor.model.model_type if cfg is not None else None
    if trained_type is not None and trained_type != model_type:
        raise DexrlError(f"the run trained model_type {trained_type} but the base checkpoint is "
                         f"{model_type}", "pass the run's own base checkpoint with --base",
                         where=str(model_dir), code="base-model-type-mismatch")
    provenance = {}
    download = _download_manifest(model_dir)
    if download is not None:
        provenance["download"] = download
    return CheckpointSource(
        kind, given, model_dir, model_type, weights=weights, run_dir=run_dir,
        step=checkpoint_step(step_dir) if step_dir is not None else None, base_from=base_from,
        training=_training_from_config(cfg, run_dir) if cfg is not None else None,
        provenance=provenance, notes=notes,
    )


def _base_from_config(cfg: Any, run_dir: Path) -> Path:
    path = Path(recorded_model_path(cfg, run_dir)).expanduser()
    if not path.is_dir():
        raise DexrlError(f"the run's base checkpoint {path} does not exist on this machine",
                         f"{_fetch_hint(run_dir)}, or pass its folder with --base",
                         where=f"{run_dir}/config.yaml actor.model.model_path",
                         code="base-not-on-machine")
    return path.resolve()


def _fetch_hint(run_dir: Path) -> str:
    """How to get the base checkpoint back: its repo id when the run's manifest knows it."""
    provenance = read_manifest(run_dir).get("checkpoint") or {}
    repo = provenance.get("repo_id") if isinstance(provenance, dict) else None
    return f"run `dexrl download {repo}`" if repo else "download it again (`dexrl download`)"


def _training_from_config(cfg: Any, run_dir: Path) -> TrainingInfo:
    return TrainingInfo(**training_facts(cfg), source=f"{run_dir}/config.yaml")


def _download_manifest(model_dir: Path) -> dict[str, Any] | None:
    manifest = read_download_manifest(model_dir)
    return dataclasses.asdict(manifest) if manifest is not None else None


def _read_json(path: Path) -> dict[str, Any]:
    return read_json(path, what=path.name)
