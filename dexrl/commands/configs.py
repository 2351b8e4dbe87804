"""``dexrl configs``: list the training configs (suite × policy), plugins' included."""

from __future__ import annotations

import typer

EPILOG = """\
Examples:

  dexrl configs
      A table of suite, model, config name, episode horizon and the distribution that provides
      the policy (dexrl or a plugin), one row per config; broken plugins are listed below it.
"""


def configs() -> None:
    """List the configs: one per LIBERO suite × policy (built in or from a plugin)."""
    from rich.console import Console
    from rich.table import Table

    from dexrl.catalog import SUITES, policies
    from dexrl.config import shipped_matrix
    from dexrl.plugins import discover

    table = Table(title="dexrl configs")
    for col in ("suite", "model", "model_type", "config name", "eval horizon", "from"):
        table.add_column(col)
    known = policies()
    for suite, policy, name in shipped_matrix():
        table.add_row(suite, policy, known[policy].model_type, name,
                      str(SUITES[suite].horizon), known[policy].distribution)
    Console().print(table)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    for problem in discover().problems:
        err.print(f"warning: {problem.message}\n  hint: {problem.hint}", markup=False)


def mount(app: typer.Typer) -> None:
    """Add the verb to the app."""
    app.command("configs", epilog=EPILOG)(configs)
