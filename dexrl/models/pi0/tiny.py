"""Tiny random checkpoints in the exact Dexbotic directory layout, for tests and ``--smoke``."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import sentencepiece
import torch
from safetensors.torch import save_file
from torch import nn
from transformers import CONFIG_MAPPING

from dexrl.checkpoints.files.layout import INDEX_FILE, SINGLE_FILE
from dexrl.models.pi0.config import Pi0Config
from dexrl.models.pi0.network import Pi0Network
from dexrl.models.tiny_files import (
    write_norm_stats,
    write_preprocessor_config,
    write_sentencepiece_tokenizer,
)

TINY_IMAGE_SIZE = 32
TINY_PROMPT_LENGTH = 16
# Real checkpoints record where the processor lived on the training machine; loaders ignore it.
FOREIGN_PROCESSOR_PATH = "/mnt/cluster/dexbotic/hf_models/paligemma-3b-pt-224"


def tiny_tower(kind: str, vocab_size: int, hidden: int, mlp: int, **extra: Any) -> dict[str, Any]:
    """A tiny HF decoder config dict of ``model_type`` ``kind`` (2 layers, 2 heads of 16, 1 KV
    head: the layout π0 and DM0 towers must share), with ``extra`` settings."""
    return CONFIG_MAPPING[kind](
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=mlp,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        **extra,
    ).to_dict()


def _gemma(vocab_size: int, hidden: int, mlp: int) -> dict[str, Any]:
    return tiny_tower(
        "gemma",
        vocab_size,
        hidden,
        mlp,
        hidden_act="gelu_pytorch_tanh",
        hidden_activation="gelu_pytorch_tanh",
        rope_theta=1e4,
    )


def tiny_pi0_config(
    vocab_size: int, *, projector: str = "mlp2x_gelu", chunk_size: int = 8, dtype_name: str
) -> dict[str, Any]:
    """The ``config.json`` content of a tiny π0 (sizes of the dexbotic-models doc, §5)."""
    llm = _gemma(vocab_size, hidden=32, mlp=64)
    vision = CONFIG_MAPPING["siglip_vision_model"](
        hidden_size=24,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=TINY_IMAGE_SIZE,
        patch_size=8,
        vision_use_head=False,
    ).to_dict()
    for sub in (llm, vision):
        sub.pop("dtype", None)  # transformers < 4.56 (which Dexbotic used) writes torch_dtype
        sub["torch_dtype"] = dtype_name
    expert = _gemma(vocab_size, hidden=16, mlp=32)
    return dexbotic_config("dexbotic_pi0", "Pi0ForCausalLM", llm, expert, {
        "vision_config": vision,
        "processor_config": FOREIGN_PROCESSOR_PATH,
        "mm_projector_type": projector,
        "mm_hidden_size": vision["hidden_size"],
        "mm_vision_tower": None,
        "action_dim": 32,
        "chunk_size": chunk_size,
        "chat_template": "dexbotic",
        "init_llm_weights": False,
        "torch_dtype": dtype_name,
        "use_cache": False,
    })


def dexbotic_config(
    model_type: str,
    architecture: str,
    llm: dict[str, Any],
    expert: dict[str, Any],
    fields: dict[str, Any],
) -> dict[str, Any]:
    """A Dexbotic ``config.json``: the LLM's fields at the top level (Dexbotic's ``_merge_llm``),
    ``model_type``, ``architectures``, both tower sub-configs, then ``fields``."""
    merged = {k: v for k, v in llm.items() if k != "model_type"}
    return {
        **merged,
        "model_type": model_type,
        "architectures": [architecture],
        "llm_config": llm,
        "action_config": expert,
        **fields,
    }


def random_weights(config: Pi0Config, seed: int) -> dict[str, torch.Tensor]:
    """A seeded random state dict of our π0 module tree (see :func:`random_state`)."""
    torch.manual_seed(seed)
    return random_state(Pi0Network(config), seed)


def random_state(module: nn.Module, seed: int) -> dict[str, torch.Tensor]:
    """A seeded random state dict for ``module``'s entries.

    Every tensor is redrawn with a fan-in scale (HF's init leaves norms at 0 and uses std 0.02),
    so that outputs depend visibly on every weight.
    """
    generator = torch.Generator().manual_seed(seed)
    state = {}
    for name, tensor in module.state_dict().items():
        std = 1.0 / math.sqrt(tensor.shape[-1]) if tensor.ndim >= 2 else 0.1
        state[name] = torch.randn(tensor.shape, generator=generator) * std
    return state


def write_tiny_pi0(
    path: str | Path,
    *,
    seed: int = 0,
    shards: int = 1,
    projector: str = "mlp2x_gelu",
    dtype: torch.dtype = torch.float32,
    wrapped_norm_stats: bool = True,
    chunk_size: int = 8,
    extra_keys: bool = False,
) -> Path:
    """Write a tiny random Dexbotic π0 checkpoint directory and return its path.

    Args:
        path: Directory to create (may exist).
        seed: Seeds weights and norm stats.
        shards: 1 writes ``model.safetensors``; more write ``model-0000k-of-0000n.safetensors`` and
            ``model.safetensors.index.json``.
        projector: ``mm_projector_type`` (``linear``, ``linear<N>x``, ``mlp<N>x_gelu``).
        dtype: Dtype the weights are saved in.
        wrapped_norm_stats: Write ``norm_stats.json`` under a ``"norm_stats"`` key.
        chunk_size: Actions per chunk.
        extra_keys: Also save the unused tensors real checkpoints may hold (the expert's
            ``embed_tokens`` and a SigLIP ``head``), which loaders must tolerate.
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    sp_model = write_sentencepiece_tokenizer(path, model_max_length=TINY_PROMPT_LENGTH)
    vocab = sentencepiece.SentencePieceProcessor(model_file=str(sp_model)).get_piece_size()
    write_preprocessor_config(path, image_size=TINY_IMAGE_SIZE)
    write_norm_stats(path, seed, wrapped=wrapped_norm_stats)
    dtype_name = str(dtype).removeprefix("torch.")
    raw = tiny_pi0_config(vocab, projector=projector, chunk_size=chunk_size, dtype_name=dtype_name)
    state = random_weights(Pi0Config.from_dict(raw), seed)
    if extra_keys:
        state.update(_unused_tensors(raw, seed))
    return save_checkpoint(path, raw, state, dtype=dtype, shards=shards)


def _unused_tensors(raw: dict[str, Any], seed: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed + 1)
    width, vision = raw["action_config"]["hidden_size"], raw["vision_config"]["hidden_size"]
    head = "model.mm_vision_tower.vision_tower.vision_model.head."
    shapes = {
        "model.action_expert.embed_tokens.weight": (raw["vocab_size"], width),
        head + "probe": (1, 1, vision),
        head + "attention.in_proj_weight": (3 * vision, vision),
        head + "layernorm.weight": (vision,),
        head + "mlp.fc1.weight": (raw["vision_config"]["intermediate_size"], vision),
    }
    return {k: torch.randn(s, generator=generator) for k, s in shapes.items()}


def save_checkpoint(
    path: Path,
    raw: dict[str, Any],
    state: dict[str, torch.Tensor],
    *,
    dtype: torch.dtype,
    shards: int,
) -> Path:
    """Write ``config.json`` (``raw``) and ``state`` cast to ``dtype`` (see :func:`save_weights`)
    into ``path``; returns ``path``."""
    (path / "config.json").write_text(json.dumps(raw, indent=2) + "\n")
    save_weights(path, {k: v.to(dtype).contiguous() for k, v in state.items()}, shards)
    return path


def save_weights(path: Path, state: dict[str, torch.Tensor], shards: int) -> None:
    """Write ``model.safetensors``, or ``shards`` files plus ``model.safetensors.index.json``."""
    metadata = {"format": "pt"}
    if shards == 1:
        save_file(state, str(path / SINGLE_FILE), metadata=metadata)
        return
    keys = sorted(state)
    per_shard = math.ceil(len(keys) / shards)
    weight_map = {}
    for index in range(shards):
        name = f"model-{index + 1:05d}-of-{shards:05d}.safetensors"
        part = keys[index * per_shard : (index + 1) * per_shard]
        save_file({k: state[k] for k in part}, str(path / name), metadata=metadata)
        weight_map.update(dict.fromkeys(part, name))
    total = sum(t.numel() * t.element_size() for t in state.values())
    index_content = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (path / INDEX_FILE).write_text(json.dumps(index_content, indent=2) + "\n")
