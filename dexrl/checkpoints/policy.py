"""The one loading path: the policy of a Dexbotic checkpoint folder, whichever model (or plugin)
it is (:func:`load_policy`), that of a resolved checkpoint with RLinf's training weights swapped
in (:func:`load_eval_policy`), reading those weights, and what a model type's policy declares
about its checkpoints (defaults, keys it leaves unused).

Importing this module is cheap (``sources``, ``validate`` and the bridge read model types with
it); torch and transformers load on the first :func:`load_policy` or
:func:`read_training_weights`.
Which checkpoints load, and with which inference class, is the catalog's
(:class:`dexrl.catalog.ModelSpec`), so a plugin's policy loads the same way.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dexrl.catalog import get_policy, load_reference, policy_for
from dexrl.checkpoints.verify import checkpoint_model_type
from dexrl.errors import DexrlError, one_line

if TYPE_CHECKING:
    import torch

    from dexrl.catalog import Policy
    from dexrl.checkpoints.sources import CheckpointSource
    from dexrl.models.flow.policy import FlowPolicy
    from dexrl.models.transforms import NormMode

VALUE_HEAD_PREFIX = "value_head."  # the critic dexrl's RLinf adapters add beside `model.*`
NOISE_HEAD_PREFIX = "noise_head."  # flow_noise's learned noise head, also beside `model.*`
HEAD_PREFIXES = (VALUE_HEAD_PREFIX, NOISE_HEAD_PREFIX)  # the RL heads: not Dexbotic weights

# float16 is left out on purpose: the additive mask value overflows it.
_DTYPE_NAMES = {"float32": "float32", "fp32": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16"}


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

    reference = _policy(model_type).model.extra_keys
    return tuple(load_reference(reference)) if reference is not None else ()


def _policy(model_type: str) -> Policy:
    return get_policy(model_type)


def is_unused_key(key: str, patterns: tuple[str, ...]) -> bool:
    """Whether ``key`` matches one of ``patterns`` (glob)."""
    return any(fnmatch.fnmatchcase(key, p) for p in patterns)


def read_training_weights(weights: Path) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """RLinf's ``full_weights.pt`` split into (network weights, RL heads: the value head and
    flow_noise's noise head, keys with their prefixes).

    The file is memory-mapped: only tensors that are used get read.

    Raises:
        DexrlError: unreadable, or not a flat state dict of tensors.
    """
    import torch

    try:
        state = torch.load(weights, map_location="cpu", weights_only=True, mmap=True)
    except Exception as exc:  # torch raises many types for corrupt or foreign files
        raise DexrlError(f"cannot read training weights ({type(exc).__name__}: "
                         f"{one_line(exc, typed=False)[:200]})",
                         "the file is corrupt or not an RLinf full_weights.pt; use another "
                         "checkpoint step", where=str(weights),
                         code="checkpoint-weights-unreadable") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise DexrlError("training weights are not a flat state dict of tensors",
                         "pass RLinf's actor/model_state_dict/full_weights.pt", where=str(weights),
                         code="checkpoint-weights-invalid")
    head = {k: v for k, v in state.items() if k.startswith(HEAD_PREFIXES)}
    return {k: v for k, v in state.items() if k not in head}, head


def load_eval_policy(source: CheckpointSource, device: str | torch.device,
                     dtype: torch.dtype | str | None = None) -> FlowPolicy:
    """Load the policy of a resolved checkpoint (see
    :func:`dexrl.checkpoints.sources.resolve_checkpoint`).

    For RLinf weights the base checkpoint's loader builds the network (its dtype rules apply, with
    the training weights' dtype as the target unless ``dtype`` is given), then every network
    weight is replaced by the trained one. Loading ``dexrl export``'s output of the same step
    therefore gives the same tensors.

    Raises:
        DexrlError: the training weights do not match the network of the base checkpoint.
    """
    if source.form == "dexbotic":
        policy = load_policy(source.model_dir, device=device, dtype=dtype)
    else:
        from dexrl.checkpoints.files.weights import checkpoint_dtype, load_strict  # torch

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
    import torch

    with torch.no_grad():
        for tensor in [*network.parameters(), *network.buffers()]:
            if tensor.device.type == "cpu":
                tensor.data = tensor.data.clone()
