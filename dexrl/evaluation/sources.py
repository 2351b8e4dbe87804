"""What ``--ckpt`` points at, and loading its policy.

Design notes: docs/design/evaluation.md.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from omegaconf import OmegaConf

from dexrl.checkpoints.policy import checkpoint_model_type
from dexrl.errors import DexrlError
from dexrl.runs.layout import (
    CONFIG_FILE,
    WEIGHTS_IN_STEP,
    checkpoint_step,
    run_of_step,
    step_of_weights,
)

if TYPE_CHECKING:
    from dexrl.catalog import Policy

EXPORT_MANIFEST = "dexrl-export.json"
VALUE_HEAD_PREFIX = "value_head."  # the critic dexrl's RLinf adapters add beside `model.*`


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
    """A resolved ``--ckpt``.

    Attributes:
        form: ``dexbotic`` (a checkpoint directory) or ``rlinf`` (training weights of a run).
        path: What the user passed, resolved.
        model_dir: The Dexbotic-layout directory with config, tokenizer, preprocessor, norm stats
            (for ``rlinf``: the base checkpoint).
        model_type: ``config.json`` model_type of ``model_dir``.
        weights: ``full_weights.pt`` (``rlinf`` only).
        run_dir: The RLinf run (``rlinf`` only).
        step: The global step (``rlinf`` only).
        base_from: How ``model_dir`` was found (``rlinf`` only).
        training: The training run's settings, when known.
        provenance: Download manifest and/or export manifest of ``model_dir``.
        notes: What the user should know about how it was found (skipped incomplete steps, a
            moved run folder).
    """

    form: str
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

    def describe(self) -> dict[str, Any]:
        """JSON-ready record for results.json and export manifests."""
        record = dataclasses.asdict(self)
        record.pop("notes")
        return {k: str(v) if isinstance(v, Path) else v for k, v in record.items()}


def resolve_checkpoint(path: str | Path, base: str | Path | None = None) -> CheckpointSource:
    """Work out which form ``path`` is and everything needed to load it.

    Args:
        path: See the module docstring for the accepted forms.
        base: The base checkpoint of an RLinf checkpoint (default: from the run's config).

    Raises:
        DexrlError: nothing usable at ``path``, or the base checkpoint cannot be found.
    """
    path = Path(path).expanduser().resolve()
    if not path.exists():
        raise DexrlError("checkpoint path does not exist", "pass a Dexbotic checkpoint folder, an "
                         "RLinf run folder, a global_step_N folder or its full_weights.pt",
                         where=str(path), code="checkpoint-not-found")
    if path.is_file():
        return _rlinf_source(path, path, step_of_weights(path), base)
    if (path / "config.json").is_file():
        return _dexbotic_source(path)
    if (path / WEIGHTS_IN_STEP).is_file():
        return _rlinf_source(path, path / WEIGHTS_IN_STEP, path, base)
    if (path / CONFIG_FILE).is_file():
        from dexrl.runs.checkpoints import pick_checkpoint, skipped
        from dexrl.runs.opened import open_run

        run = open_run(path)
        chosen = pick_checkpoint(run.dir, purpose="use")
        step_dir = chosen.path
        if not (step_dir / WEIGHTS_IN_STEP).is_file():
            raise DexrlError(f"the run's latest complete checkpoint {step_dir.name} has no full "
                             f"weights ({WEIGHTS_IN_STEP})",
                             "pass another step's folder (checkpoints/global_step_N)",
                             where=str(step_dir), code="checkpoint-no-full-weights")
        notes = skipped(run.dir, chosen) + ([f"note: the run folder was at {run.moved_from}; "
                                             f"its paths now point into {run.dir}"]
                                            if run.moved_from else [])
        source = _rlinf_source(path, step_dir / WEIGHTS_IN_STEP, step_dir, base)
        return dataclasses.replace(source, notes=tuple(notes))
    raise DexrlError("not a checkpoint: no config.json, no actor/model_state_dict/"
                     "full_weights.pt and no RLinf run (config.yaml + checkpoints/)",
                     "pass a Dexbotic checkpoint folder, an RLinf run folder, a global_step_N "
                     "folder or its full_weights.pt", where=str(path),
                     code="checkpoint-unrecognized")


def _dexbotic_source(path: Path) -> CheckpointSource:
    provenance = {}
    training = None
    export = path / EXPORT_MANIFEST
    if export.is_file():
        provenance["export"] = _read_json(export)
        if provenance["export"].get("training"):
            training = TrainingInfo(**{**provenance["export"]["training"], "source": str(export)})
    download = _download_manifest(path)
    if download is not None:
        provenance["download"] = download
    return CheckpointSource("dexbotic", path, path, checkpoint_model_type(path), training=training,
                            provenance=provenance)


def _rlinf_source(given: Path, weights: Path, step_dir: Path | None,
                  base: str | Path | None) -> CheckpointSource:
    if weights.suffix not in (".pt", ".pth", ".bin"):
        raise DexrlError("not a checkpoint file (expected RLinf's full_weights.pt)",
                         "pass a Dexbotic checkpoint folder or an RLinf global_step_N folder",
                         where=str(weights), code="checkpoint-not-weights-file")
    run_dir = run_of_step(step_dir) if step_dir is not None else None
    cfg = None
    if run_dir is not None and (run_dir / CONFIG_FILE).is_file():
        from dexrl.runs.checkpoints import is_complete, pick_checkpoint
        from dexrl.runs.opened import open_run

        if not is_complete(step_dir):
            pick_checkpoint(run_dir, checkpoint_step(step_dir))  # raises: incomplete
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
    trained_type = OmegaConf.select(cfg, "actor.model.model_type") if cfg is not None else None
    if trained_type is not None and trained_type != model_type:
        raise DexrlError(f"the run trained model_type {trained_type} but the base checkpoint is "
                         f"{model_type}", "pass the run's own base checkpoint with --base",
                         where=str(model_dir), code="base-model-type-mismatch")
    provenance = {}
    download = _download_manifest(model_dir)
    if download is not None:
        provenance["download"] = download
    return CheckpointSource(
        "rlinf", given, model_dir, model_type, weights=weights, run_dir=run_dir,
        step=checkpoint_step(step_dir) if step_dir is not None else None, base_from=base_from,
        training=_training_from_config(cfg, run_dir) if cfg is not None else None,
        provenance=provenance,
    )


def _base_from_config(cfg: Any, run_dir: Path) -> Path:
    try:
        value = OmegaConf.select(cfg, "actor.model.model_path")
    except Exception as exc:  # an interpolation that does not resolve here
        raise DexrlError(f"actor.model.model_path does not resolve ({' '.join(str(exc).split())})",
                         "pass the checkpoint the run started from with --base",
                         where=f"{run_dir}/config.yaml", code="base-path-unresolvable") from None
    if not value:
        raise DexrlError("the run config has no actor.model.model_path",
                         "pass the checkpoint the run started from with --base",
                         where=f"{run_dir}/config.yaml", code="base-not-in-config")
    path = Path(str(value)).expanduser()
    if not path.is_dir():
        raise DexrlError(f"the run's base checkpoint {path} does not exist on this machine",
                         f"{_fetch_hint(run_dir)}, or pass its folder with --base",
                         where=f"{run_dir}/config.yaml actor.model.model_path",
                         code="base-not-on-machine")
    return path.resolve()


def _fetch_hint(run_dir: Path) -> str:
    """How to get the base checkpoint back: its repo id when the run's manifest knows it."""
    from dexrl.runs.record import read_manifest

    provenance = read_manifest(run_dir).get("checkpoint") or {}
    repo = provenance.get("repo_id") if isinstance(provenance, dict) else None
    return f"run `dexrl download {repo}`" if repo else "download it again (`dexrl download`)"


def _training_from_config(cfg: Any, run_dir: Path) -> TrainingInfo:
    def get(key: str) -> Any:
        try:
            return OmegaConf.select(cfg, key)
        except Exception:  # unresolvable interpolation: treat as unknown
            return None

    init_params = get("env.eval.init_params") or get("env.train.init_params")
    chunks, steps = get("actor.model.num_action_chunks"), get("actor.model.num_steps")
    task = get("env.train.dexrl_env")
    section = get(f"env.train.{task}") if task else None
    return TrainingInfo(
        suite=get("env.train.task_suite_name") or task,
        num_action_chunks=int(chunks) if chunks is not None else None,
        num_steps=int(steps) if steps is not None else None,
        init_params=OmegaConf.to_container(init_params) if init_params is not None else None,
        source=f"{run_dir}/config.yaml",
        task=OmegaConf.to_container(section, resolve=True) if section is not None else None,
    )


def _download_manifest(model_dir: Path) -> dict[str, Any] | None:
    from dexrl.hub.manifest import read_download_manifest

    manifest = read_download_manifest(model_dir)
    return dataclasses.asdict(manifest) if manifest is not None else None


def _read_json(path: Path) -> dict[str, Any]:
    from dexrl.models.layout import read_json

    return read_json(path, what=path.name)


def model_defaults(model_type: str) -> tuple[int, int]:
    """(num_action_chunks, num_steps) documented in the policy's model config."""
    from importlib import resources

    policy = _policy(model_type)
    path = resources.files(policy.config_package) / "model" / f"{policy.model_config_name}.yaml"
    cfg = OmegaConf.create(path.read_text())
    return int(cfg.num_action_chunks), int(cfg.num_steps)


def unused_key_patterns(model_type: str) -> tuple[str, ...]:
    """Checkpoint keys the model type's loader accepts without using them (its spec's
    ``extra_keys``)."""
    from dexrl.catalog import load_reference

    reference = _policy(model_type).model.extra_keys
    return tuple(load_reference(reference)) if reference is not None else ()


def _policy(model_type: str) -> Policy:
    from dexrl.catalog import get_policy

    return get_policy(model_type)


def is_unused_key(key: str, patterns: tuple[str, ...]) -> bool:
    """Whether ``key`` matches one of ``patterns`` (glob)."""
    return any(fnmatch.fnmatchcase(key, p) for p in patterns)


def read_training_weights(weights: Path) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """RLinf's ``full_weights.pt`` split into (network weights, value head).

    The file is memory-mapped: only tensors that are used get read.

    Raises:
        DexrlError: unreadable, or not a flat state dict of tensors.
    """
    try:
        state = torch.load(weights, map_location="cpu", weights_only=True, mmap=True)
    except Exception as exc:  # torch raises many types for corrupt or foreign files
        raise DexrlError(f"cannot read training weights ({type(exc).__name__}: "
                         f"{' '.join(str(exc).split())[:200]})",
                         "the file is corrupt or not an RLinf full_weights.pt; use another "
                         "checkpoint step", where=str(weights),
                         code="checkpoint-weights-unreadable") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise DexrlError("training weights are not a flat state dict of tensors",
                         "pass RLinf's actor/model_state_dict/full_weights.pt", where=str(weights),
                         code="checkpoint-weights-invalid")
    head = {k: v for k, v in state.items() if k.startswith(VALUE_HEAD_PREFIX)}
    return {k: v for k, v in state.items() if k not in head}, head


def load_eval_policy(source: CheckpointSource, device: str | torch.device,
                     dtype: torch.dtype | str | None = None) -> Any:
    """Load the policy of a resolved checkpoint.

    For RLinf weights the base checkpoint's loader builds the network (its dtype rules apply, with
    the training weights' dtype as the target unless ``dtype`` is given), then every network
    weight is replaced by the trained one. Loading ``dexrl export``'s output of the same step
    therefore gives the same tensors.

    Raises:
        DexrlError: the training weights do not match the network of the base checkpoint.
    """
    from dexrl.checkpoints.policy import load_policy

    if source.form == "dexbotic":
        policy = load_policy(source.model_dir, device=device, dtype=dtype)
    else:
        from dexrl.models.weight_loading import checkpoint_dtype, load_strict

        trained, _ = read_training_weights(source.weights)
        policy = load_policy(source.model_dir, device=device,
                             dtype=dtype or checkpoint_dtype(trained))
        expected = policy.network.state_dict()
        cast = {k: v.to(device=expected[k].device, dtype=expected[k].dtype)
                if k in expected and v.is_floating_point() and v.shape == expected[k].shape
                else v for k, v in trained.items()}
        load_strict(policy.network, cast, source=str(source.weights))
    _own_memory(policy.network)
    policy.network.eval()
    return policy


def _own_memory(network: torch.nn.Module) -> None:
    """Move every CPU weight into memory of its own.

    Weights read from safetensors or a memory-mapped ``.pt`` are views into the file's buffer at
    arbitrary alignments, and CPU BLAS kernels round differently depending on alignment. With
    fresh allocations the same values give the same actions whichever file they came from (the
    export round trip is bit-exact).
    """
    with torch.no_grad():
        for tensor in [*network.parameters(), *network.buffers()]:
            if tensor.device.type == "cpu":
                tensor.data = tensor.data.clone()
