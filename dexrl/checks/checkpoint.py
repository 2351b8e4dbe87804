"""Is a directory a usable Dexbotic checkpoint? File-level checks only (no weight loading).

The π0/DM0 loaders and ``dexrl download`` build on these; ``validate`` runs them when the
configured ``model_path`` exists.
"""

from __future__ import annotations

import json
from pathlib import Path

from dexrl.checks import Finding

SUPPORTED_MODEL_TYPES = ("dexbotic_pi0", "dexbotic_dm0")

# Tokenizer files per model type: any one of each tuple must exist.
_TOKENIZER_FILES: dict[str, tuple[tuple[str, ...], ...]] = {
    "dexbotic_pi0": (("tokenizer.model",), ("tokenizer_config.json",)),
    "dexbotic_dm0": (("vocab.json",), ("merges.txt",), ("tokenizer_config.json",)),
}


def read_config_json(path: Path) -> tuple[dict | None, Finding | None]:
    """Parse ``<path>/config.json``; return (config, None) or (None, finding)."""
    cfg_file = path / "config.json"
    if not cfg_file.is_file():
        return None, Finding(
            "error", str(cfg_file), "no config.json: this is not a Dexbotic checkpoint directory",
            "point at the folder that holds config.json (e.g. one made by `dexrl download`)",
        )
    try:
        data = json.loads(cfg_file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, Finding("error", str(cfg_file), f"unreadable JSON ({exc})",
                             "re-download the checkpoint")
    if not isinstance(data, dict):
        return None, Finding("error", str(cfg_file), "config.json is not a JSON object",
                             "re-download the checkpoint")
    return data, None


def weight_files(path: Path) -> list[Path]:
    """The safetensors files of a checkpoint (shards listed by the index when present)."""
    index = path / "model.safetensors.index.json"
    if index.is_file():
        try:
            names = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return []
        return [path / n for n in names]
    return sorted(path.glob("*.safetensors"))


def check_checkpoint_dir(path: Path, expected_model_type: str | None = None) -> list[Finding]:
    """Check the files of a checkpoint directory against what its model type needs."""
    path = Path(path)
    if not path.is_dir():
        return [Finding("error", str(path), "checkpoint directory does not exist",
                        "run `dexrl download <repo>` or pass the right path")]
    cfg, finding = read_config_json(path)
    if finding:
        return [finding]
    assert cfg is not None
    findings: list[Finding] = []
    model_type = cfg.get("model_type")
    where = str(path / "config.json")
    if model_type not in SUPPORTED_MODEL_TYPES:
        findings.append(Finding("error", where, f"unsupported model_type '{model_type}'",
                                f"dexrl loads {', '.join(SUPPORTED_MODEL_TYPES)} checkpoints"))
        return findings
    if expected_model_type and model_type != expected_model_type:
        findings.append(Finding(
            "error", where,
            f"checkpoint is '{model_type}' but the config trains '{expected_model_type}'",
            "choose the matching --model, or point model_path at a matching checkpoint",
        ))
    shards = weight_files(path)
    missing_shards = [p.name for p in shards if not p.is_file()]
    if not shards:
        findings.append(Finding("error", str(path), "no *.safetensors weights",
                                "re-download the checkpoint"))
    elif missing_shards:
        findings.append(Finding("error", str(path / "model.safetensors.index.json"),
                                f"shards listed but missing: {', '.join(missing_shards)}",
                                "re-download the checkpoint"))
    for choices in _TOKENIZER_FILES[model_type]:
        if not any((path / c).is_file() for c in choices):
            findings.append(Finding("error", str(path / choices[0]), "tokenizer file missing",
                                    "copy the tokenizer files into the checkpoint directory"))
    if model_type == "dexbotic_pi0" and not (path / "preprocessor_config.json").is_file():
        findings.append(Finding("error", str(path / "preprocessor_config.json"),
                                "image processor config missing",
                                "copy preprocessor_config.json into the checkpoint directory"))
    if not (path / "norm_stats.json").is_file():
        findings.append(Finding("error", str(path / "norm_stats.json"),
                                "normalization statistics missing",
                                "copy norm_stats.json from the training run into the checkpoint"))
    return findings
