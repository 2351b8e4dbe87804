"""Published LIBERO success rates of the known checkpoints, each with its source and protocol, and
whether a run may be put beside them (the same protocol, exactly, on the whole suite)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Percent success per suite.
_DB_PI0_ZOO = {"libero_spatial": 97.0, "libero_object": 98.2, "libero_goal": 94.0,
               "libero_10": 86.4}
_PI0_SFT_RLINF = {"libero_spatial": 97.6, "libero_object": 97.6, "libero_goal": 94.8,
                  "libero_10": 85.0}
_PI0_PPO_RLINF = {"libero_spatial": 99.2, "libero_object": 99.8, "libero_goal": 97.2,
                  "libero_10": 95.6}

ZOO = "Dexbotic model zoo: the model card of huggingface.co/Dexmal/libero-db-pi0"
RLINF_PAGE = "Dexbotic's RLinf page (RLinf as an RL backend for Dexbotic, with RLinf's docs)"
# Protocols as dexrl names them; "rlinf" is RLinf's own evaluation (its LiberoEnv: 15 settle
# steps, its seeds), which no dexrl protocol reproduces exactly.
PROTOCOL_NOTES = {"standard": "the published LIBERO protocol (openpi/Dexbotic client)",
                  "rlinf": "RLinf's own evaluation (15 settle steps, RLinf's scene seeds)"}


@dataclass(frozen=True)
class Reference:
    """A published number set for one model type.

    Attributes:
        label: What the numbers are of.
        model_type: The model type they apply to.
        percent: Suite -> percent success.
        source: Where they are published.
        protocol: The protocol they were measured with (a key of :data:`PROTOCOL_NOTES`).
    """

    label: str
    model_type: str
    percent: Mapping[str, float]
    source: str
    protocol: str


REFERENCES = (
    Reference("Dexbotic π0 SFT (DB-Pi0)", "dexbotic_pi0", _DB_PI0_ZOO, ZOO, "standard"),
    Reference("Dexbotic π0 SFT", "dexbotic_pi0", _PI0_SFT_RLINF, RLINF_PAGE, "rlinf"),
    Reference("Dexbotic π0 + RLinf PPO", "dexbotic_pi0", _PI0_PPO_RLINF, RLINF_PAGE, "rlinf"),
)


def references_for(model_type: str, suite: str, overall: Mapping[str, Any], full_suite: bool,
                   protocol: Mapping[str, Any] | None = None) -> list[dict[str, Any]] | None:
    """Published numbers of this model type and suite, each with its source and protocol; a row
    is ``comparable`` (and says whether this run's 95 % interval contains it) only when this run
    covered the whole suite under that protocol exactly.

    Only a run over every task and every initial state gets rows; otherwise None.
    """
    if not full_suite:
        return None
    low, high = overall["ci95"]
    exact = bool(protocol and protocol.get("exact"))
    name = (protocol or {}).get("name")
    rows = []
    for r in REFERENCES:
        if r.model_type != model_type or suite not in r.percent:
            continue
        comparable = exact and r.protocol == name
        rows.append({"label": r.label, "percent": r.percent[suite], "source": r.source,
                     "protocol": r.protocol, "comparable": comparable,
                     "inside_ci95": (low <= r.percent[suite] / 100 <= high) if comparable
                     else None})
    return rows or None
