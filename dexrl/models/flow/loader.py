"""The one flow loader: a Dexbotic checkpoint's weights key for key into a flow network (π0 and DM0
declare their differences as data on their policy class, see
:meth:`dexrl.models.flow.policy.FlowPolicy.load_network`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

import torch

from dexrl.checkpoints.files.layout import weight_files
from dexrl.checkpoints.files.weights import (
    NetworkT,
    build_and_load,
    checkpoint_dtype,
    read_state_dict,
)
from dexrl.models.flow.config import FlowConfig
from dexrl.models.flow.projector import check_projector

_LOW_PRECISION = (torch.bfloat16, torch.float16)


def load_weights(
    ckpt_dir: str | Path,
    config: FlowConfig,
    build: Callable[[], NetworkT],
    allowed_extra: Iterable[str],
    *,
    device: str | torch.device,
    dtype: torch.dtype | None,
    keeps_float32: Callable[[str], bool] | None = None,
) -> NetworkT:
    """Load ``ckpt_dir``'s weights key for key into ``build()``, in eval mode.

    Checks the projector weights against ``config``, casts
    floating weights to ``dtype`` (None: the checkpoint's) and loads strictly, tolerating the
    unused ``allowed_extra`` keys.

    Args:
        ckpt_dir: Dexbotic checkpoint directory.
        config: Its parsed ``config.json``.
        build: Makes the empty network (called on the meta device).
        allowed_extra: Patterns of checkpoint keys the network does not have.
        device: Where the weights go (read there directly).
        dtype: Floating dtype of the weights.
        keeps_float32: Keys that stay float32 when ``dtype`` is bf16 or fp16 (None: none).
    """
    files = weight_files(Path(ckpt_dir))
    state, _ = read_state_dict(files, device=device)
    check_projector(
        config.projector_type,
        config.projector_bias,
        state,
        source=config.source,
        given=bool(config.raw.get("mm_projector_type")),
    )
    target = dtype or checkpoint_dtype(state)

    def cast(key: str) -> torch.dtype:
        keep = keeps_float32 is not None and target in _LOW_PRECISION and keeps_float32(key)
        return torch.float32 if keep else target

    state = {k: v.to(cast(k)) if v.is_floating_point() else v for k, v in state.items()}
    return build_and_load(build, state, files, allowed_extra=allowed_extra, device=device)
