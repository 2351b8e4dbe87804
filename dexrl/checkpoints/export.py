"""``dexrl export``: an RLinf training checkpoint back into Dexbotic's checkpoint layout.

Design notes: docs/design/evaluation.md.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from dexrl import __version__
from dexrl.checkpoints.files.layout import weight_files
from dexrl.checkpoints.files.weights import checkpoint_dtype
from dexrl.checkpoints.policy import (
    NOISE_HEAD_PREFIX,
    VALUE_HEAD_PREFIX,
    is_unused_key,
    read_training_weights,
    unused_key_patterns,
)
from dexrl.checkpoints.sources import EXPORT_MANIFEST, CheckpointSource
from dexrl.errors import DexrlError, disk_full_in_text
from dexrl.hub.client import hub_endpoint, hub_errors
from dexrl.hub.home import check_repo_id
from dexrl.hub.manifest import MANIFEST_NAME
from dexrl.runs import durable

WEIGHTS_FILE = "model.safetensors"
VALUE_HEAD_FILE = "value_head.safetensors"
NOISE_HEAD_FILE = "noise_head.safetensors"
CARD_FILE = "README.md"
_NOT_COPIED = {MANIFEST_NAME, EXPORT_MANIFEST, CARD_FILE,
               "model.safetensors.index.json"}


@dataclass(frozen=True)
class Exported:
    """What an export wrote.

    Attributes:
        out: The checkpoint folder.
        tensors: Entries in ``model.safetensors``.
        from_base: Unused entries copied from the base checkpoint (the network never reads them).
        value_head: Whether ``value_head.safetensors`` was written.
        noise_head: Whether ``noise_head.safetensors`` (flow_noise's head) was written.
        dtype: Compute dtype of the weights (config.json ``torch_dtype`` was set to it).
        results: The results.json whose table is in the model card, if any.
    """

    out: Path
    tensors: int
    from_base: list[str]
    value_head: bool
    dtype: str
    results: Path | None
    noise_head: bool = False


def check_export_out(out: Path, overwrite: bool) -> None:
    """Refuse a non-empty ``out`` unless ``overwrite`` and it is an earlier dexrl export."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise DexrlError("the output path is a file", "choose a folder with --out", where=str(out),
                         code="export-out-is-a-file")
    if not out.is_dir() or not any(out.iterdir()):
        return
    if not overwrite:
        raise DexrlError("the output folder is not empty", "choose another --out, or add "
                         "--overwrite to replace an earlier export", where=str(out),
                         code="export-out-not-empty")
    if not (out / EXPORT_MANIFEST).is_file():
        raise DexrlError("the output folder holds files that are not a dexrl export; "
                         "--overwrite only replaces earlier exports", "choose another --out",
                         where=str(out), code="export-out-foreign-files")


def check_export(source: CheckpointSource, out: Path, overwrite: bool) -> Path:
    """Refuse what export cannot do before anything is read: a Dexbotic checkpoint (nothing to
    convert), an output folder in the way (:func:`check_export_out`). Returns ``out`` resolved."""
    if source.form != "rlinf":
        raise DexrlError("this is already a Dexbotic checkpoint; export converts RLinf training "
                         "checkpoints", "pass an RLinf run folder or its global_step_N folder",
                         where=str(source.path), code="export-already-dexbotic")
    out = Path(out).expanduser().resolve()
    check_export_out(out, overwrite)
    return out


def export_checkpoint(source: CheckpointSource, out: Path, *, keep_value_head: bool = False,
                      keep_noise_head: bool = False, overwrite: bool = False,
                      results: tuple[Path, dict[str, Any]] | None = None) -> Exported:
    """Write the Dexbotic-layout checkpoint of an RLinf checkpoint to ``out``.

    Args:
        source: A resolved RLinf checkpoint (see ``resolve_checkpoint``).
        out: Output folder (must be empty or absent; see :func:`check_export_out`).
        keep_value_head: Also write the value head to ``value_head.safetensors``.
        keep_noise_head: Also write flow_noise's noise head to ``noise_head.safetensors`` (the
            Dexbotic weights never hold it: Dexbotic's loader would refuse the keys, and its
            deterministic inference never calls it).
        overwrite: Replace an earlier export at ``out``.
        results: A results.json and its checked content, for the model card's table
            (``dexrl export`` passes the newest evaluation of this step under ``RUN_DIR/eval``
            unless ``--results`` names one).

    Raises:
        DexrlError: not an RLinf checkpoint, weights that do not match the base checkpoint, or
            an output folder in the way.
    """
    out = check_export(source, out, overwrite)
    results, results_data = results if results is not None else (None, None)
    trained, heads = read_training_weights(source.weights)
    kept = {name: {k: v.contiguous() for k, v in heads.items() if k.startswith(prefix)}
            for name, prefix, keep in ((VALUE_HEAD_FILE, VALUE_HEAD_PREFIX, keep_value_head),
                                       (NOISE_HEAD_FILE, NOISE_HEAD_PREFIX, keep_noise_head))
            if keep}
    kept = {name: head for name, head in kept.items() if head}
    tensors, from_base = _dexbotic_state(source, trained)
    dtype = _compute_dtype(tensors)
    out.parent.mkdir(parents=True, exist_ok=True)
    # check_export_out allowed an earlier out (empty, or an earlier export): it is replaced.
    with durable.staged_folder(out) as partial:
        _copy_base_files(source.model_dir, partial)
        _set_config_dtype(partial / "config.json", dtype)
        _save_file(tensors, partial / WEIGHTS_FILE)
        for name, head in kept.items():
            _save_file(head, partial / name)
        manifest = _manifest(source, len(tensors), from_base, VALUE_HEAD_FILE in kept,
                             dtype, results, noise_head=NOISE_HEAD_FILE in kept)
        (partial / EXPORT_MANIFEST).write_text(json.dumps(manifest, indent=2, default=str) + "\n")
        (partial / CARD_FILE).write_text(model_card(manifest, results_data), encoding="utf-8")
    return Exported(out, len(tensors), from_base, VALUE_HEAD_FILE in kept, dtype, results,
                    noise_head=NOISE_HEAD_FILE in kept)


def _save_file(tensors: dict[str, torch.Tensor], path: Path) -> None:
    """safetensors' ``save_file``, its I/O errors as OSError: it reports a full disk as a
    SafetensorError carrying Rust's "(os error 28)"."""
    try:
        save_file(tensors, str(path), metadata={"format": "pt"})
    except SafetensorError as exc:
        full = disk_full_in_text(str(exc), path)
        if full is None:
            raise
        raise full from exc


def _dexbotic_state(source: CheckpointSource, trained: dict[str, torch.Tensor]
                    ) -> tuple[dict[str, torch.Tensor], list[str]]:
    """The trained weights checked against the base checkpoint's key set, gaps filled from it."""
    shapes: dict[str, tuple[int, ...]] = {}
    origin: dict[str, Path] = {}
    for path in weight_files(source.model_dir):
        with safe_open(str(path), framework="pt") as handle:
            for key in handle.keys():  # noqa: SIM118 - safe_open is not a Mapping
                shapes[key] = tuple(handle.get_slice(key).get_shape())
                origin[key] = path
    unused = unused_key_patterns(source.model_type)
    unknown = sorted(k for k in trained if k not in shapes)
    wrong = sorted(f"{k} (trained {tuple(trained[k].shape)}, base {shapes[k]})"
                   for k in trained if k in shapes and tuple(trained[k].shape) != shapes[k])
    lacking = sorted(k for k in shapes if k not in trained and not is_unused_key(k, unused))
    problems = [("not in the base checkpoint", unknown), ("with another shape", wrong),
                ("missing from the training weights", lacking)]
    details = [f"{label} ({len(keys)}): {', '.join(keys[:5])}" + (" ..." if len(keys) > 5 else "")
               for label, keys in problems if keys]
    if details:
        raise DexrlError("the training weights do not match the base checkpoint's weights",
                         "pass the run's own base checkpoint with --base", where=str(
                             source.weights), details=details, code="base-weights-mismatch")
    state = {k: v.contiguous() for k, v in trained.items()}
    from_base = sorted(k for k in shapes if k not in trained)
    for key in from_base:
        with safe_open(str(origin[key]), framework="pt") as handle:
            state[key] = handle.get_tensor(key)
    return state, from_base


def _compute_dtype(state: dict[str, torch.Tensor]) -> str:
    return str(checkpoint_dtype(state)).removeprefix("torch.")


def _copy_base_files(base: Path, dest: Path) -> None:
    """Everything of the base checkpoint except weights, manifests, card and hidden files."""
    def ignore(folder: str, names: list[str]) -> list[str]:
        return [n for n in names if n.startswith(".") or n in _NOT_COPIED
                or n.endswith(".safetensors")]

    try:
        shutil.copytree(base, dest, ignore=ignore, dirs_exist_ok=True)
    except shutil.Error as exc:  # every file's OSError, as text: a full disk is an OSError again
        entries = exc.args[0] if exc.args and isinstance(exc.args[0], list) else []
        found = (disk_full_in_text(str(why), Path(dst)) for *_, dst, why in entries)
        full = next((f for f in found if f is not None), None)
        if full is None:
            raise
        raise full from exc


def _set_config_dtype(config: Path, dtype: str) -> None:
    """Make config.json's ``torch_dtype`` name the weights' dtype (RL may train in float32)."""
    data = json.loads(config.read_text(encoding="utf-8"))
    if data.get("torch_dtype") != dtype:
        data["torch_dtype"] = dtype
        config.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def _manifest(source: CheckpointSource, tensors: int, from_base: list[str], value_head: bool,
              dtype: str, results: Path | None, *, noise_head: bool = False) -> dict[str, Any]:
    training = dataclasses.asdict(source.training) if source.training else None
    if training:
        training.pop("source")
    return {
        "format": 1,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "dexrl": __version__,
        "model_type": source.model_type,
        "source": {"run_dir": str(source.run_dir) if source.run_dir else None,
                   "step": source.step, "weights": str(source.weights),
                   "weights_bytes": source.weights.stat().st_size},
        "base": {"path": str(source.model_dir), "found_from": source.base_from,
                 "download": source.provenance.get("download")},
        "training": training,
        "weights": {"file": WEIGHTS_FILE, "tensors": tensors, "dtype": dtype,
                    "copied_from_base": from_base,
                    "value_head": VALUE_HEAD_FILE if value_head else None,
                    "noise_head": NOISE_HEAD_FILE if noise_head else None},
        "results": str(results) if results else None,
    }


def model_card(manifest: dict[str, Any], results: dict[str, Any] | None) -> str:
    """A hub model card: provenance, how to load it, and the evaluation table if any."""
    download = manifest["base"].get("download") or {}
    training = manifest.get("training") or {}
    lines = ["---", "tags: [robotics, vision-language-action, libero, dexbotic, rlinf, "
             "reinforcement-learning]"]
    if download.get("repo_id"):
        lines.append(f"base_model: {download['repo_id']}")
    lines += ["---", "", f"# {manifest['model_type']} post-trained with RLinf PPO (dexrl)", "",
              "A Dexbotic-layout checkpoint exported by `dexrl export` from an RLinf training "
              "checkpoint; Dexbotic's loader and `dexrl eval` load it as is.", "",
              f"- Base checkpoint: {download.get('repo_id') or manifest['base']['path']}",
              f"- Training step: {manifest['source']['step']} "
              f"(suite {training.get('suite') or 'unknown'}, "
              f"{training.get('num_action_chunks')} actions per call, "
              f"{training.get('num_steps')} denoising steps)",
              f"- Weights dtype: {manifest['weights']['dtype']}; value head "
              f"{'kept in ' + VALUE_HEAD_FILE if manifest['weights']['value_head'] else 'dropped'}"
              + (f"; noise head kept in {NOISE_HEAD_FILE}"
                 if manifest["weights"].get("noise_head") else ""),
              "", "```bash", "dexrl eval --ckpt PATH_TO_THIS_FOLDER --suite "
              f"{training.get('suite') or 'libero_spatial'}", "```", ""]
    if results is not None:
        lines += results_table(results)
    return "\n".join(lines) + "\n"


def results_table(results: dict[str, Any]) -> list[str]:
    """Markdown lines of a results.json's per-task and overall success rates."""
    config = results.get("config", {})
    lines = [f"## LIBERO evaluation: {results['suite']}", "",
             f"{results['overall']['episodes']} episodes, max {config.get('max_episode_steps')} "
             f"steps, {config.get('action_chunk')} actions per call, {config.get('num_steps')} "
             f"denoising steps, seed {results.get('seeds', {}).get('seed')}; "
             "success rate with its Wilson 95 % interval.", "",
             "| task | instruction | successes | success rate (95 % CI) |",
             "|---:|---|---:|---|"]
    rows = [(str(t["task_id"]), t.get("language", ""), t) for t in results["per_task"]]
    rows.append(("**all**", "", results["overall"]))
    for task, language, r in rows:
        low, high = r["ci95"]
        language = language.replace("|", "\\|")  # a pipe would end the table cell
        lines.append(f"| {task} | {language} | {r['successes']}/{r['episodes']} | "
                     f"{100 * r['success_rate']:.1f} % ({100 * low:.1f}-{100 * high:.1f}) |")
    return [*lines, ""]


def push_to_hub(folder: Path, repo_id: str, *, private: bool = False, api: Any = None) -> str:
    """Upload an exported folder to a hub model repository (created if needed).

    Args:
        folder: The export.
        repo_id: ``owner/name``.
        private: Create the repository as private.
        api: A ``huggingface_hub.HfApi``-like object (default: ``HfApi()``).

    Returns:
        The repository URL.
    """
    check_repo_id(repo_id)
    endpoint = hub_endpoint()
    with hub_errors(repo_id, "main", endpoint, stage="upload to", dest=Path(folder)):
        if api is None:
            from huggingface_hub import HfApi

            api = HfApi()
        api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True)
        api.upload_folder(folder_path=str(folder), repo_id=repo_id, repo_type="model",
                          commit_message="Upload checkpoint exported by dexrl")
    return f"{endpoint}/{repo_id}"
