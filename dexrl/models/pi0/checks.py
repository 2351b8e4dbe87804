"""π0's deep checkpoint check (``ModelSpec.check_tensors``): names and shapes against the network
dexrl builds, without loading a weight."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dexrl.errors import DexrlError, Finding, findings_from


def check_pi0_tensors(config: dict[str, Any], tensors: Mapping[str, Any], *,
                      config_source: str, weights_source: str) -> list[Finding]:
    """Check tensor names and shapes against the π0 network dexrl builds from ``config.json``.

    Builds :class:`~dexrl.models.pi0.network.Pi0Network` on the meta device (no memory, no
    weights) and runs the π0 loader's own key accounting on shape-only stand-ins, so a checkpoint
    passes here exactly when the loader would accept its names and shapes.
    """
    import torch

    from dexrl.checkpoints.files.weights import load_strict
    from dexrl.models.flow.projector import check_projector
    from dexrl.models.pi0.config import ALLOWED_EXTRA_KEYS, Pi0Config
    from dexrl.models.pi0.network import Pi0Network

    try:
        parsed = Pi0Config.from_dict(config, source=config_source)
        check_projector(parsed.projector_type, parsed.projector_bias, tensors,
                        source=config_source)
        with torch.device("meta"):
            network = Pi0Network(parsed)
            stand_ins = {k: torch.empty(t.shape) for k, t in tensors.items()}
        load_strict(network, stand_ins, allowed_extra=ALLOWED_EXTRA_KEYS, source=weights_source)
    except DexrlError as exc:
        return findings_from(exc, config_source)
    return []
