"""dexrl's CLI run in-process, as the tests of the verbs drive it."""

from __future__ import annotations

from click.testing import Result
from typer.testing import CliRunner

from dexrl.cli import app

RUNNER = CliRunner()


def run(*args: object, columns: int = 250, **env: str) -> Result:
    """``dexrl ARGS`` (each made a string) in-process: the CliRunner result. The terminal is
    ``columns`` wide, so that tables keep every column; ``env`` adds variables for the call.
    A verb's tests bind theirs: ``run = partial(cli.run, "doctor")``."""
    return RUNNER.invoke(app, [str(a) for a in args], env={"COLUMNS": str(columns), **env})
