"""Rich tables of an evaluation: per task, the suite total, references and ``--compare``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.table import Table


def _pct(value: float) -> str:
    return f"{100 * value:.1f}"


def _rate(row: Mapping[str, Any]) -> str:
    low, high = row["ci95"]
    return f"{_pct(row['success_rate'])} % [{_pct(low)}, {_pct(high)}]"


def results_table(results: Mapping[str, Any]) -> Table:
    """Task id, instruction, k/n, success rate with its Wilson 95 % interval, mean length."""
    table = Table(title=f"{results['suite']}: success rate (Wilson 95 % interval)",
                  show_footer=True)
    overall = results["overall"]
    table.add_column("task", justify="right", footer="all")
    table.add_column("instruction", overflow="fold", footer="")
    table.add_column("successes", justify="right",
                     footer=f"{overall['successes']}/{overall['episodes']}")
    table.add_column("success rate", justify="right", footer=_rate(overall))
    table.add_column("mean length", justify="right", footer=f"{overall['mean_length']:.1f}")
    for row in results["per_task"]:
        table.add_row(str(row["task_id"]), row["language"],
                      f"{row['successes']}/{row['episodes']}", _rate(row),
                      f"{row['mean_length']:.1f}")
    return table


def blind_bound_line(results: Mapping[str, Any]) -> str:
    """The task's blind bound beside this run's success rate."""
    bound = results["blind_bound"]
    verdict = "above it" if bound["above"] else "not above it (95 % interval)"
    return (f"Blind bound: {_pct(bound['success_rate'])} % (no policy that ignores the "
            f"instruction and the image does better); this run: {_rate(results['overall'])}, "
            f"{verdict}")


def settings_table(config: Mapping[str, Any]) -> Table:
    """Each value the run uses and where it came from."""
    table = Table(title="Evaluation settings", show_header=True)
    table.add_column("setting")
    table.add_column("value", overflow="fold")
    table.add_column("from", overflow="fold")
    sources = config.get("sources", {})
    for key, value in config.items():
        if key == "sources":
            continue
        shown = ",".join(map(str, value)) if isinstance(value, list) else str(value)
        table.add_row(key, "-" if value is None or shown == "" else shown, sources.get(key, ""))
    return table


def reference_table(results: Mapping[str, Any]) -> Table | None:
    """Published numbers beside this full-suite run, if any apply: compared (inside this run's
    interval or not) only under the protocol they were measured with."""
    if not results.get("reference"):
        return None
    low, high = results["overall"]["ci95"]
    table = Table(title=f"Published numbers vs this run ({_pct(low)}-{_pct(high)} %, 95 %)")
    table.add_column("reference")
    table.add_column("published", justify="right")
    table.add_column("protocol")
    table.add_column("inside this run's interval")
    table.add_column("source", overflow="fold")
    for row in results["reference"]:
        verdict = ("not compared: another protocol" if not row.get("comparable", True)
                   else "yes" if row["inside_ci95"] else "[bold red]no[/]")
        table.add_row(row["label"], f"{row['percent']:.1f} %", row.get("protocol", "-"),
                      verdict, row.get("source", "-"))
    return table


def protocol_line(protocol: Mapping[str, Any] | None) -> str:
    """One line naming the protocol of a run (or of an older results.json without one)."""
    if not protocol:
        return "Protocol: not recorded (an older results.json)"
    name = protocol["name"]
    if name == "standard" and protocol.get("exact"):
        return ("Protocol: standard (the published LIBERO protocol: openpi examples/libero/"
                "main.py; sources per field in results.json)")
    if name == "standard":
        return ("Protocol: standard with deviations (" + ", ".join(protocol["deviations"])
                + "): not comparable with published numbers")
    return ("Protocol: training (the checkpoint's own settings, a scene seed per episode): not "
            "the published protocol")


def comparison_table(comparison: Mapping[str, Any]) -> Table:
    """Per-task paired deltas and the exact McNemar test."""
    overall = comparison["overall"]
    test = overall["mcnemar"]
    table = Table(title=f"Paired comparison with {comparison['other']} "
                        f"({comparison['pairs']} shared episodes)", show_footer=True)
    table.add_column("task", justify="right", footer="all")
    table.add_column("pairs", justify="right", footer=str(comparison["pairs"]))
    table.add_column("this", justify="right", footer=str(overall["successes"]))
    table.add_column("other", justify="right", footer=str(overall["other_successes"]))
    table.add_column("delta (pp)", justify="right", footer=f"{100 * overall['delta']:+.1f}")
    for row in comparison["per_task"]:
        table.add_row(str(row["task_id"]), str(row["pairs"]), str(row["successes"]),
                      str(row["other_successes"]), f"{100 * row['delta']:+.1f}")
    table.caption = (f"exact McNemar: {test['only_this_succeeded']} pairs only this run solved, "
                     f"{test['only_other_succeeded']} only the other; p = {test['p_value']:.4g}")
    return table
