"""``dexrl configs``: list the training configs (suite × policy), plugins' included."""

from __future__ import annotations

import typer

from dexrl.catalog import SUITES, policies
from dexrl.config.algorithms import ALGO_SUMMARY, ALGOS, NOISE_SUMMARY, NOISES
from dexrl.console import console, print_json
from dexrl.plugins import discover

EPILOG = """\
Examples:

  dexrl configs
      A table of suite, model, config name, the algorithm it ships with, episode horizon and the
      distribution that provides the policy (dexrl or a plugin), one row per config, then the
      algorithms (--algo), exploration noises (--noise) and execution modes (--mode) every
      config runs with; broken plugins are listed below it.

  dexrl configs --json | jq -r '.configs[].config_name'
      The same rows as a JSON document (schema dexrl.configs/1), broken plugins under "problems".
"""

COLUMNS = ("suite", "model", "model_type", "config_name", "algorithm", "eval_horizon", "from")
HEADERS = ("suite", "model", "model_type", "config name", "algorithm", "eval horizon", "from")
SHIPPED_ALGORITHM = "ppo"  # every shipped config: GAE with a value head; --algo grpo switches


def rows() -> list[dict[str, object]]:
    """One record per config (suite × policy)."""
    from dexrl.config.compose import shipped_matrix

    known = policies()
    return [dict(zip(COLUMNS, (suite, policy, known[policy].model_type, name, SHIPPED_ALGORITHM,
                               SUITES[suite].horizon, known[policy].distribution), strict=True))
            for suite, policy, name in shipped_matrix()]


def configs(
    as_json: bool = typer.Option(False, "--json", help="Print a JSON document instead."),
) -> None:
    """List the configs: one per suite (LIBERO or built-in task) × policy (built in or plugin)."""
    from rich.table import Table

    from dexrl.config.modes import MODE_SUMMARY, MODES

    records, problems = rows(), discover().problems
    if as_json:
        print_json("dexrl.configs/1", configs=records, modes=list(MODES),
                   algorithms=list(ALGOS), noise_methods=list(NOISES),
                   problems=[{"message": p.message, "hint": p.hint} for p in problems])
        return
    table = Table(title="dexrl configs")
    for header in HEADERS:
        table.add_column(header)
    for record in records:
        table.add_row(*(str(v) for v in record.values()))
    console().print(table)
    console().print(f"Algorithms (--algo, every config): {ALGO_SUMMARY}; docs/algorithms.md",
                    markup=False)
    console().print(f"Exploration noise (--noise, every config): {NOISE_SUMMARY}",
                    markup=False)
    console().print(f"Execution modes (--mode, every config): {MODE_SUMMARY}; "
                    "docs/execution-modes.md", markup=False)
    err = console(stderr=True)
    for problem in problems:
        err.print(f"warning: {problem.message}\n  hint: {problem.hint}", markup=False)


def mount(app: typer.Typer) -> None:
    """Add the verb to the app."""
    app.command("configs", epilog=EPILOG)(configs)
