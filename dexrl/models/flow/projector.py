"""Vision-to-LLM projectors in Dexbotic's ``mm_projector_type`` naming, and key-based detection."""

from __future__ import annotations

import re
from collections.abc import Iterable

from torch import nn

from dexrl.errors import DexrlError

PREFIX = "model.mm_projector."


def build_projector(kind: str, in_features: int, out_features: int, bias: bool) -> nn.Module:
    """Build a projector with Dexbotic's parameter names (``weight``/``bias`` or ``0.``, ``2.``…).

    Args:
        kind: ``linear`` (Linear with bias), ``linear<N>x`` (one Linear, bias per ``bias``; the
            N-fold widening happens in the vision features) or ``mlp<N>x_gelu`` (N Linears with
            exact GELU between them).
        in_features: Width of the vision features.
        out_features: LLM hidden size.
        bias: ``projector_bias`` from config.json (only used by ``linear<N>x``).
    """
    if kind == "linear":
        return nn.Linear(in_features, out_features)
    if re.fullmatch(r"linear\d+x", kind):
        return nn.Linear(in_features, out_features, bias=bias)
    match = re.fullmatch(r"mlp(\d+)x_gelu", kind)
    if match:
        layers: list[nn.Module] = [nn.Linear(in_features, out_features)]
        for _ in range(int(match.group(1)) - 1):
            layers += [nn.GELU(), nn.Linear(out_features, out_features)]
        return nn.Sequential(*layers)
    raise ValueError(f"unknown projector type {kind!r}")


def projector_layout(keys: Iterable[str]) -> str:
    """Describe the projector a checkpoint holds from its ``model.mm_projector.*`` key names."""
    names = sorted(k[len(PREFIX) :] for k in keys if k.startswith(PREFIX))
    if not names:
        return "no projector"
    linears = sorted({int(n.split(".")[0]) for n in names if n.split(".")[0].isdigit()})
    if linears:
        return f"mlp{len(linears)}x_gelu"
    return "linear" if "bias" in names else "linear without bias (linear<N>x)"


def check_projector(
    kind: str, bias: bool, keys: Iterable[str], *, source: str, given: bool = True
) -> None:
    """Fail clearly when config.json's ``mm_projector_type`` disagrees with the weight names.

    ``given`` is False when config.json names no type and ``kind`` is Dexbotic's default.
    """
    found = projector_layout(keys)
    if kind == "linear" or re.fullmatch(r"linear\d+x", kind):
        expected = "linear" if kind == "linear" or bias else "linear without bias (linear<N>x)"
    else:
        expected = kind
    if found != expected:
        said = (
            f"says mm_projector_type {kind!r}"
            if given
            else (f"has no mm_projector_type (Dexbotic default {kind!r})")
        )
        raise DexrlError(
            f"config.json {said} but the weights hold {found}",
            hint="set mm_projector_type in config.json to the type the checkpoint was trained "
            "with (the model.mm_projector.* keys tell: '0./2.' = mlp2x_gelu, 'weight/bias' = "
            "linear)",
            where=source,
            code="model-projector-mismatch",
        )
