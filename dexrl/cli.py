"""The ``dexrl`` command line: mounts one command per verb and renders expected errors once."""

from __future__ import annotations

import typer
from typer.core import TyperGroup

from dexrl import __version__
from dexrl.commands import configs, doctor, download, eval, export, plot, resume, train, validate
from dexrl.errors import DexrlError


class _DexrlGroup(TyperGroup):
    """Renders every expected failure once: ``error:``/``hint:`` on stderr, exit 2.

    That covers DexrlError from any command and click's usage errors (unknown verbs and flags,
    missing or invalid values).
    """

    def invoke(self, ctx):  # noqa: ANN001, ANN201 - click's signature
        try:
            return super().invoke(ctx)
        except DexrlError as exc:
            typer.echo(exc.render(), err=True)
            raise typer.Exit(exc.exit_code) from None
        except typer.TyperException as exc:  # click's usage errors (typer vendors click)
            if getattr(exc, "exit_code", None) != 2 or type(exc).__name__ == "NoArgsIsHelpError":
                raise
            sub = getattr(exc, "ctx", None)
            where = sub.command_path if sub is not None else ctx.command_path
            typer.echo(f"error: {where}: {exc.format_message()}\n"
                       f"hint: `{where} --help` lists the flags and examples", err=True)
            raise typer.Exit(2) from None


app = typer.Typer(
    name="dexrl",
    cls=_DexrlGroup,
    help="Post-train Dexbotic VLA policies (π0, DM0) with RL on LIBERO, RLinf as the backend.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode="rich",
)

for module in (train, resume, validate, configs, download, doctor, eval, export, plot):
    module.mount(app)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"dexrl {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", "-V", callback=_version, is_eager=True, help="Print the version."
    ),
) -> None:
    """Post-train Dexbotic VLA policies (π0, DM0) with RL on LIBERO, RLinf as the backend."""


def main() -> None:
    """Console entry point."""
    app()
