"""Load the policy of a Dexbotic checkpoint folder, whichever model (or plugin) it is, and what a
model type's policy declares about its checkpoints (defaults, keys it leaves unused).

Importing this module is cheap; torch and transformers load on the first :func:`load_policy`.
Which checkpoints load, and with which inference class, is the catalog's
(:class:`dexrl.catalog.ModelSpec`), so a plugin's policy loads the same way.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from dexrl.catalog import Policy
    from dexrl.models.flow.policy import FlowPolicy
    from dexrl.models.transforms import NormMode

# float16 is left out on purpose: the additive mask value overflows it.
_DTYPE_NAMES = {"float32": "float32", "fp32": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16"}


def checkpoint_model_type(ckpt_dir: str | Path) -> str:
    """The ``model_type`` of a checkpoint's config.json; DexrlError when no policy has it."""
    from dexrl.catalog import model_types
    from dexrl.checkpoints.files.layout import read_json
    from dexrl.errors import DexrlError

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


def load_policy(
    ckpt_dir: str | Path,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | str | None = None,
    norm_mode: NormMode = "mean_std",
) -> FlowPolicy:
    """Load the policy of a Dexbotic checkpoint directory; the model type comes from config.json.

    Args:
        ckpt_dir: Checkpoint directory (config.json, safetensors, tokenizer, preprocessor, stats).
        device: Device for the weights.
        dtype: Weight dtype (``torch.bfloat16`` or a name like ``"bf16"``); None keeps the
            checkpoint's. DM0 in bf16 keeps its vision stem and RMSNorms in float32.
        norm_mode: State/action normalization, ``mean_std`` (the LIBERO checkpoints of both
            models and RLinf) or ``quantile``.

    Returns:
        The ``ModelSpec.inference`` class of the checkpoint's policy (π0:
        :class:`~dexrl.models.pi0.policy.Pi0Policy`, DM0:
        :class:`~dexrl.models.dm0.policy.Dm0Policy`), with
        ``predict(env_obs, noise=None, num_steps=10, num_action_chunks=None)``.

    Raises:
        DexrlError: unsupported model type or one without an inference policy, bad dtype name,
            missing or inconsistent files.
    """
    from dexrl.catalog import load_reference, policy_for
    from dexrl.errors import DexrlError

    model_type = checkpoint_model_type(ckpt_dir)
    policy = policy_for(model_type)
    if policy is None or policy.model.inference is None:
        raise DexrlError(f"policy {policy.name if policy else model_type!r} declares no "
                         "inference policy, so its checkpoints cannot be evaluated",
                         hint="set ModelSpec.inference in the policy's declaration",
                         where=str(Path(ckpt_dir) / "config.json"),
                         code="model-no-inference-policy")
    policy_class = load_reference(policy.model.inference)
    return policy_class.from_checkpoint(
        ckpt_dir, device=device, dtype=_torch_dtype(dtype), norm_mode=norm_mode
    )


def _torch_dtype(dtype: Any) -> Any:
    """Accept None, a torch dtype, or a dtype name."""
    import torch

    from dexrl.errors import DexrlError

    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    name = _DTYPE_NAMES.get(str(dtype).lower().removeprefix("torch."))
    if name is None:
        raise DexrlError(f"unknown dtype {dtype!r}", hint="use float32 or bfloat16", where="dtype",
                         code="model-dtype-unknown")
    return getattr(torch, name)


def model_defaults(model_type: str) -> tuple[int, int]:
    """(num_action_chunks, num_steps) documented in the policy's model config."""
    from importlib import resources

    from omegaconf import OmegaConf

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

