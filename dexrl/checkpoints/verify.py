"""Is a directory a usable Dexbotic checkpoint? No weight is ever loaded.

:func:`check_checkpoint_dir` checks which files exist (cheap, no torch; ``validate`` runs it when
the configured ``model_path`` exists). :func:`verify_checkpoint` adds the deep checks ``dexrl
download`` runs: safetensors headers, the model's own tensor check (π0: names and shapes against
the network dexrl builds from ``config.json``), and the normalization statistics. What a model
type needs is its :class:`~dexrl.catalog.ModelSpec`, a plugin's included.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from dexrl.catalog import load_reference, model_types, policy_for
from dexrl.checkpoints.files.headers import WeightStats, read_weights
from dexrl.checkpoints.files.layout import INDEX_FILE, read_json, weight_files
from dexrl.errors import DexrlError, Finding, errors, findings_from


def read_config_json(path: Path) -> tuple[dict | None, Finding | None]:
    """Parse ``<path>/config.json``; return (config, None) or (None, finding)."""
    cfg_file = path / "config.json"
    if not cfg_file.is_file():
        return None, Finding(
            "error", str(cfg_file), "no config.json: this is not a Dexbotic checkpoint directory",
            "point at the folder that holds config.json (e.g. one made by `dexrl download`)",
            code="model-file-missing",
        )
    try:
        data = json.loads(cfg_file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, Finding("error", str(cfg_file), f"unreadable JSON ({exc})",
                             "re-download the checkpoint", code="model-json-unreadable")
    if not isinstance(data, dict):
        return None, Finding("error", str(cfg_file), "config.json is not a JSON object",
                             "re-download the checkpoint", code="model-json-not-object")
    return data, None


def checkpoint_model_type(ckpt_dir: str | Path) -> str:
    """The ``model_type`` of a checkpoint's config.json; DexrlError when no policy has it."""
    config_path = Path(ckpt_dir) / "config.json"
    model_type = read_json(config_path, what="model config").get("model_type")
    supported = model_types()
    if model_type not in supported:
        raise DexrlError(
            f"model_type {model_type!r} is not supported",
            hint=f"use a checkpoint of type {', '.join(supported)}",
            where=str(config_path),
            code="model-type-unsupported",
        )
    return model_type


def check_checkpoint_dir(path: Path, expected_model_type: str | None = None) -> list[Finding]:
    """Check the files of a checkpoint directory against what its model type needs."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        return [Finding("error", str(path), "is a file, not a checkpoint directory",
                        "pass the folder that holds config.json and the *.safetensors weights",
                        code="checkpoint-not-a-folder")]
    if not path.is_dir():
        return [Finding("error", str(path), "checkpoint directory does not exist",
                        "run `dexrl download <repo>` or pass the right path",
                        code="checkpoint-not-found")]
    cfg, finding = read_config_json(path)
    if finding:
        return [finding]
    assert cfg is not None
    findings: list[Finding] = []
    model_type = cfg.get("model_type")
    where = str(path / "config.json")
    policy = policy_for(model_type) if isinstance(model_type, str) else None
    if policy is None:
        findings.append(Finding("error", where, f"unsupported model_type '{model_type}'",
                                f"dexrl loads {', '.join(model_types())} checkpoints",
                                code="model-type-unsupported"))
        return findings
    spec = policy.model
    if expected_model_type and model_type != expected_model_type:
        findings.append(Finding(
            "error", where,
            f"checkpoint is '{model_type}' but the config trains '{expected_model_type}'",
            "choose the matching --model, or point model_path at a matching checkpoint",
            code="model-type-mismatch",
        ))
    try:
        weight_files(path)
    except DexrlError as exc:
        findings += findings_from(exc, str(path))
    for choices in spec.tokenizer_files:
        if not any((path / c).is_file() for c in choices):
            findings.append(Finding("error", str(path / choices[0]), "tokenizer file missing",
                                    "copy the tokenizer files into the checkpoint directory",
                                    code="tokenizer-missing"))
    if spec.preprocessor and not (path / "preprocessor_config.json").is_file():
        findings.append(Finding("error", str(path / "preprocessor_config.json"),
                                "image processor config missing",
                                "copy preprocessor_config.json into the checkpoint directory",
                                code="model-preprocessor-missing"))
    if spec.norm_stats and not (path / "norm_stats.json").is_file():
        findings.append(Finding("error", str(path / "norm_stats.json"),
                                "normalization statistics missing",
                                "copy norm_stats.json from the training run into the checkpoint",
                                code="norm-stats-missing"))
    return findings


@dataclass
class Verification:
    """The outcome of :func:`verify_checkpoint`.

    Attributes:
        path: The checkpoint directory.
        model_type: ``config.json`` model_type, when readable.
        findings: Every problem found.
        checks: What was checked, in words (for the summary and the manifest).
        weights: Header statistics of the weight files, when they were readable.
        notes: What could not be checked, and why.
    """

    path: Path
    model_type: str | None = None
    findings: list[Finding] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    weights: WeightStats | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing that stops a launch was found."""
        return not errors(self.findings)


def verify_checkpoint(path: Path, expected_model_type: str | None = None) -> Verification:
    """Check everything about a checkpoint directory that can be checked without loading weights.

    Args:
        path: The checkpoint directory.
        expected_model_type: Model type it must have (e.g. for a known repository), if any.
    """
    path = Path(path)
    result = Verification(path, findings=check_checkpoint_dir(path, expected_model_type))
    cfg, _ = read_config_json(path) if path.is_dir() else (None, None)
    model_type = cfg.get("model_type") if cfg else None
    policy = policy_for(model_type) if isinstance(model_type, str) else None
    if cfg is None or policy is None:
        return result  # nothing deeper is meaningful; the findings say why
    result.model_type = model_type
    result.checks.append("files")
    try:
        files = weight_files(path)
    except DexrlError:
        files = []  # check_checkpoint_dir reported why
    index = path / INDEX_FILE
    result.weights, header_findings = read_weights(files, index if index.is_file() else None)
    result.findings += header_findings
    if files and not header_findings and result.weights.files == len(files):
        result.checks.append("weight headers")
        if policy.model.check_tensors is not None:
            source = str(index) if index.is_file() else str(files[0])
            check = load_reference(policy.model.check_tensors)
            result.findings += check(cfg, result.weights.tensors,
                                     config_source=str(path / "config.json"),
                                     weights_source=source)
            result.checks.append("tensor names and shapes")
        else:
            result.notes.append(f"tensor names and shapes are not checked for {model_type}: "
                                "its policy declares no tensor check")
    if not policy.model.norm_stats:
        return result
    norm_findings = check_norm_stats(path)
    result.findings += norm_findings
    if not norm_findings and (path / "norm_stats.json").is_file():
        result.checks.append("norm stats")
    return result


def check_norm_stats(path: Path) -> list[Finding]:
    """Check ``norm_stats.json`` holds state and action statistics the policies can use."""
    stats_file = Path(path) / "norm_stats.json"
    if not stats_file.is_file():
        return []  # check_checkpoint_dir reports the missing file
    from dexrl.models.transforms import NormStats

    try:
        NormStats.from_file(stats_file)
    except DexrlError as exc:
        return findings_from(exc, str(stats_file))
    return []
