"""Published LIBERO success rates of the known checkpoints, shown beside a full-suite run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Percent success per suite, as published for Dexbotic π0 (Dexmal/libero-db-pi0) before and after
# RLinf's PPO recipe.
_PI0_SFT = {"libero_spatial": 97.6, "libero_object": 97.6, "libero_goal": 94.8, "libero_10": 85.0}
_PI0_PPO = {"libero_spatial": 99.2, "libero_object": 99.8, "libero_goal": 97.2, "libero_10": 95.6}


@dataclass(frozen=True)
class Reference:
    """A published number set for one model type."""

    label: str
    model_type: str
    percent: Mapping[str, float]


REFERENCES = (
    Reference("Dexbotic π0 SFT (published)", "dexbotic_pi0", _PI0_SFT),
    Reference("Dexbotic π0 + RLinf PPO (published)", "dexbotic_pi0", _PI0_PPO),
)


def references_for(model_type: str, suite: str, overall: Mapping[str, Any],
                   full_suite: bool) -> list[dict[str, Any]] | None:
    """Published numbers beside this run, and whether its 95 % interval contains each.

    Only a run over every task and every initial state is comparable; otherwise None.
    """
    if not full_suite:
        return None
    low, high = overall["ci95"]
    rows = [{"label": r.label, "percent": r.percent[suite],
             "inside_ci95": low <= r.percent[suite] / 100 <= high}
            for r in REFERENCES if r.model_type == model_type and suite in r.percent]
    return rows or None
