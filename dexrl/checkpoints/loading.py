"""A resolved checkpoint's policy: the Dexbotic folder's, with RLinf's training weights swapped
in when the checkpoint is a run's (:func:`load_eval_policy`), and reading those weights.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from dexrl.checkpoints.policy import load_policy
from dexrl.checkpoints.sources import CheckpointSource
from dexrl.errors import DexrlError, one_line

VALUE_HEAD_PREFIX = "value_head."  # the critic dexrl's RLinf adapters add beside `model.*`
NOISE_HEAD_PREFIX = "noise_head."  # flow_noise's learned noise head, also beside `model.*`
HEAD_PREFIXES = (VALUE_HEAD_PREFIX, NOISE_HEAD_PREFIX)  # the RL heads: not Dexbotic weights


def read_training_weights(weights: Path) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """RLinf's ``full_weights.pt`` split into (network weights, RL heads: the value head and
    flow_noise's noise head, keys with their prefixes).

    The file is memory-mapped: only tensors that are used get read.

    Raises:
        DexrlError: unreadable, or not a flat state dict of tensors.
    """
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
                     dtype: torch.dtype | str | None = None) -> Any:
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
        from dexrl.checkpoints.files.weights import checkpoint_dtype, load_strict

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
