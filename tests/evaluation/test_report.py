"""The printed protocol line and the published-numbers table."""

from __future__ import annotations

import io

from rich.console import Console

from dexrl.evaluation.reference import references_for
from dexrl.evaluation.report import protocol_line, reference_table
from dexrl.evaluation.results import rate_summary


def text(renderable: object) -> str:
    out = io.StringIO()
    Console(file=out, width=250).print(renderable)
    return out.getvalue()


def test_the_protocol_line_names_the_protocol() -> None:
    assert protocol_line({"name": "standard", "exact": True}).startswith(
        "Protocol: standard (the published LIBERO protocol")
    line = protocol_line({"name": "standard", "exact": False, "deviations": ["--num-steps 5"]})
    assert "with deviations (--num-steps 5)" in line and "not comparable" in line
    assert protocol_line({"name": "training"}).startswith("Protocol: training")
    assert "older results.json" in protocol_line(None)


def test_published_numbers_are_compared_under_their_protocol_only() -> None:
    overall = rate_summary(489, 500)
    rows = references_for("dexbotic_pi0", "libero_spatial", overall, True,
                          {"name": "standard", "exact": True})
    shown = text(reference_table({"reference": rows, "overall": overall}))
    zoo, sft, ppo = (line for line in shown.splitlines() if "Dexbotic π0" in line)
    assert "97.0 %" in zoo and "yes" in zoo and "model card" in zoo
    assert "not compared: another protocol" in sft and "not compared" in ppo
