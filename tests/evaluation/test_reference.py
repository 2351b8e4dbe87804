"""Published numbers beside full-suite runs: with their source, compared only under their
protocol."""

from __future__ import annotations

from dexrl.evaluation.reference import references_for
from dexrl.evaluation.results import rate_summary

STANDARD = {"name": "standard", "exact": True}


def test_an_exact_standard_run_is_compared_with_the_standard_numbers_only() -> None:
    overall = rate_summary(489, 500)  # 97.8 %, Wilson interval about 96.1-98.8
    rows = references_for("dexbotic_pi0", "libero_spatial", overall, True, STANDARD)
    assert [(r["percent"], r["protocol"], r["comparable"], r["inside_ci95"]) for r in rows] == [
        (97.0, "standard", True, True), (97.6, "rlinf", False, None),
        (99.2, "rlinf", False, None)]
    assert all(r["source"] for r in rows)
    assert "model card" in rows[0]["source"] and "PPO" in rows[2]["label"]


def test_a_run_off_the_protocol_is_compared_with_nothing() -> None:
    overall = rate_summary(489, 500)
    for protocol in ({"name": "standard", "exact": False}, {"name": "training", "exact": False},
                     None):
        rows = references_for("dexbotic_pi0", "libero_spatial", overall, True, protocol)
        assert len(rows) == 3 and not any(r["comparable"] for r in rows)
        assert all(r["inside_ci95"] is None for r in rows)


def test_no_reference_for_partial_runs_other_models_or_suites() -> None:
    overall = rate_summary(40, 50)
    assert references_for("dexbotic_pi0", "libero_goal", overall, False, STANDARD) is None
    assert references_for("dexbotic_dm0", "libero_goal", overall, True, STANDARD) is None
    assert references_for("dexbotic_pi0", "libero_90", overall, True, STANDARD) is None
