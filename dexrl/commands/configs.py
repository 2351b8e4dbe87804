"""``dexrl configs``: list the shipped training configs (suite × model)."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from dexrl.catalog import POLICIES, SUITES
from dexrl.config import shipped_matrix

EPILOG = """\
Examples:

  dexrl configs
      A table of suite, model, config name and episode horizon, one row per shipped config.
"""


def configs() -> None:
    """List the shipped configs: one per LIBERO suite × policy."""
    table = Table(title="dexrl configs")
    for col in ("suite", "model", "model_type", "config name", "eval horizon"):
        table.add_column(col)
    for suite, policy, name in shipped_matrix():
        table.add_row(suite, policy, POLICIES[policy].model_type, name,
                      str(SUITES[suite].horizon))
    Console().print(table)


def mount(app: typer.Typer) -> None:
    """Add the verb to the app."""
    app.command("configs", epilog=EPILOG)(configs)
