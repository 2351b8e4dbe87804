"""What a flow-matching network (π0, DM0) reads from a Dexbotic ``config.json``, and the checks
both models' configs share."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from transformers import CONFIG_MAPPING, PretrainedConfig

from dexrl.checkpoints.files.layout import read_json
from dexrl.errors import DexrlError


@dataclass
class FlowConfig:
    """What a flow-matching network (π0, DM0) needs from ``config.json``.

    Subclasses implement :meth:`from_dict` for their ``model_type`` and build themselves with
    :meth:`from_parts`.

    Attributes:
        llm: HF config of the prefix LLM (``vocab_size`` = the merged top-level value).
        expert: HF config of the action expert.
        vision: Config of the vision tower.
        projector_type: ``mm_projector_type`` of the vision-to-LLM projector.
        projector_bias: ``projector_bias`` (default off).
        action_dim: Width of model actions and states (32).
        chunk_size: Actions per chunk (50).
        source: The file this came from, for error messages.
        raw: The parsed ``config.json``.
    """

    llm: PretrainedConfig
    expert: PretrainedConfig
    vision: Any
    projector_type: str
    projector_bias: bool
    action_dim: int
    chunk_size: int
    source: str
    raw: dict[str, Any]

    @classmethod
    def from_dir(cls, ckpt_dir: str | Path) -> Self:
        """Read ``<ckpt_dir>/config.json``."""
        path = Path(ckpt_dir) / "config.json"
        return cls.from_dict(read_json(path, what="model config"), source=str(path))

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = "config.json") -> Self:
        """Validate a parsed ``config.json`` of this model type."""
        raise NotImplementedError

    @classmethod
    def from_parts(
        cls,
        data: dict[str, Any],
        source: str,
        *,
        llm: PretrainedConfig,
        expert: PretrainedConfig,
        vision: Any,
        projector_type: str,
    ) -> Self:
        """The config of validated towers, with the top-level fields both models share."""
        if "vocab_size" in data:  # Dexbotic resizes the LLM embeddings to the merged value
            llm.vocab_size = int(data["vocab_size"])
        return cls(
            llm=llm,
            expert=expert,
            vision=vision,
            projector_type=projector_type,
            projector_bias=bool(data.get("projector_bias", False)),
            action_dim=positive_int(data, "action_dim", 32, source),
            chunk_size=positive_int(data, "chunk_size", 50, source),
            source=source,
            raw=data,
        )


def check_model_type(data: dict[str, Any], expected: str, model: str, source: str) -> None:
    """Fail unless ``config.json`` says ``model_type`` ``expected`` (``model``: its short name)."""
    if data.get("model_type") != expected:
        raise DexrlError(
            f"model_type is {data.get('model_type')!r}, expected {expected!r}",
            hint=f"point at a Dexbotic {model} checkpoint (config.json model_type {expected})",
            where=source,
            code="model-type-mismatch",
        )


def sub_config(data: dict[str, Any], key: str, kind: str, source: str) -> PretrainedConfig:
    """The nested HF config ``data[key]``, which must be an object of ``model_type`` ``kind``."""
    value = data.get(key)
    if not isinstance(value, dict):
        raise DexrlError(
            f"'{key}' must be a nested config object, found {type(value).__name__}",
            hint="use a config.json saved by Dexbotic, with the sub-configs inlined as objects",
            where=source,
            code="model-config-invalid",
        )
    if value.get("model_type") != kind:
        raise DexrlError(
            f"'{key}.model_type' is {value.get('model_type')!r}, expected {kind!r}",
            hint="config.json does not describe this model type; check the checkpoint "
            "directory",
            where=source,
            code="model-config-invalid",
        )
    fields = {k: v for k, v in value.items() if k != "model_type"}
    try:
        return CONFIG_MAPPING[kind](**fields)
    except (TypeError, ValueError) as exc:
        raise DexrlError(
            f"invalid '{key}': {exc}", hint="fix the value in config.json", where=source,
            code="model-config-invalid",
        ) from exc


def check_towers_match(llm: PretrainedConfig, expert: PretrainedConfig, source: str) -> None:
    """Fail unless the two MoT towers can share attention layers."""
    # Attention is shared per layer, so both towers need the same depth and per-head layout.
    fields = ("num_hidden_layers", "head_dim", "num_attention_heads", "num_key_value_heads")
    diffs = [
        f"{f}: llm {getattr(llm, f)} vs expert {getattr(expert, f)}"
        for f in fields
        if getattr(llm, f) != getattr(expert, f)
    ]
    if diffs:
        raise DexrlError(
            "llm_config and action_config cannot share attention layers",
            hint="both towers need the same num_hidden_layers, head_dim and attention heads",
            where=source,
            details=diffs,
            code="model-towers-mismatch",
        )


def positive_int(data: dict[str, Any], key: str, default: int, source: str) -> int:
    """``data[key]`` (``default`` when absent), which must be a positive int."""
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DexrlError(
            f"'{key}' must be a positive integer, found {value!r}",
            hint="fix the value in config.json",
            where=source,
            code="model-config-invalid",
        )
    return value
