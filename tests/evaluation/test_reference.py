"""Published numbers beside full-suite runs."""

from __future__ import annotations

from dexrl.evaluation.reference import references_for
from dexrl.evaluation.results import rate_summary


def test_full_suite_pi0_run_is_shown_beside_both_references() -> None:
    overall = rate_summary(489, 500)  # 97.8 %, Wilson interval about 96.1-98.8
    rows = references_for("dexbotic_pi0", "libero_spatial", overall, full_suite=True)
    assert [(r["percent"], r["inside_ci95"]) for r in rows] == [(97.6, True), (99.2, False)]
    assert "SFT" in rows[0]["label"] and "PPO" in rows[1]["label"]


def test_no_reference_for_partial_runs_other_models_or_suites() -> None:
    overall = rate_summary(40, 50)
    assert references_for("dexbotic_pi0", "libero_goal", overall, full_suite=False) is None
    assert references_for("dexbotic_dm0", "libero_goal", overall, full_suite=True) is None
    assert references_for("dexbotic_pi0", "libero_90", overall, full_suite=True) is None
