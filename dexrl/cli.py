"""The ``dexrl`` command line: one verb per module, imported only when that verb runs.

``dexrl --help`` lists the verbs from :data:`VERBS` without importing any of them, so it answers
at the speed of a bare Typer app; ``dexrl VERB ...`` imports that verb's module and nothing else.
Adding a verb is one row in :data:`VERBS` (a module with ``mount(app)``, as every verb has).
"""

from __future__ import annotations

import importlib
import os
from typing import Any, NoReturn

import typer
from typer.core import TyperCommand, TyperGroup

from dexrl import __version__
from dexrl.console import print_json
from dexrl.errors import DexrlError, disk_full_cause, disk_full_error, disk_full_folder

# verb -> (module that mounts it, the one-line summary `dexrl --help` shows). The summary is the
# first line of the verb function's docstring; tests/test_cli.py keeps the two in sync.
VERBS: dict[str, tuple[str, str]] = {
    "train": ("dexrl.commands.train",
              "Train a policy with PPO or GRPO on a LIBERO suite or a built-in task via RLinf."),
    "resume": ("dexrl.commands.resume",
               "Continue a run from its latest complete checkpoint (or --step N)."),
    "validate": ("dexrl.commands.validate",
                 "Compose and check a training config (no Ray, no GPU, no rlinf import)."),
    "configs": ("dexrl.commands.configs",
                "List the configs: one per suite (LIBERO or built-in task) × policy (built in or "
                "plugin)."),
    "download": ("dexrl.commands.download",
                 "Download a Dexbotic checkpoint from the Hugging Face hub and verify it."),
    "doctor": ("dexrl.commands.doctor", "Check this machine and its Ray cluster for a launch: "
               "every check ok / warn / fail / skip."),
    "eval": ("dexrl.commands.eval",
             "Evaluate a checkpoint on LIBERO (RLinf's env wrapper) or on a dexrl task."),
    "export": ("dexrl.commands.export",
               "Turn an RLinf training checkpoint into a Dexbotic-layout checkpoint folder."),
    "plot": ("dexrl.commands.plot",
             "Draw runs' learning curves (success, return, losses, KL, time split) as one PNG."),
    "verify": ("dexrl.commands.verify",
               "Check a run's checkpoints: each file's size and checksum against its marker."),
}
_CONTEXT = {"help_option_names": ["-h", "--help"]}
_JSON_META = "dexrl.json"  # ctx.meta key: the running verb was given --json
ERROR_SCHEMA = "dexrl.error/1"


def _cheap_help_option(option: Any) -> Any:
    """Default ``--help`` to False: Typer coerces an unset (None) flag through pydantic, whose
    import alone would double the start-up time of every command."""
    if option is not None:
        option.default = False
    return option


class _VerbCommand(TyperCommand):
    """A verb whose epilog (worked examples with their output) is printed as written."""

    def get_help_option(self, ctx: Any) -> Any:  # click's signature
        return _cheap_help_option(super().get_help_option(ctx))

    def collect_usage_pieces(self, ctx: Any) -> list[str]:  # click's signature
        """Arguments as ``RUN_DIR`` and ``[OVERRIDES]...``, the usual convention, rather than
        Typer's ``{run_dir}``."""
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name != "argument":
                pieces += param.get_usage_pieces(ctx)
                continue
            name = param.metavar if param.required else f"[{param.metavar}]"
            pieces.append(name + ("..." if param.nargs != 1 else ""))
        return pieces

    def invoke(self, ctx: Any) -> Any:  # click's signature
        # The one error handler (_DexrlGroup.invoke) answers a verb given --json in JSON too.
        json_flag = next((p.name for p in self.params if "--json" in getattr(p, "opts", ())),
                         None)
        ctx.meta[_JSON_META] = bool(json_flag and ctx.params.get(json_flag))
        return super().invoke(ctx)

    def format_epilog(self, ctx: Any, formatter: Any) -> None:  # click's signature
        if self.epilog:
            formatter.write("\n" + "\n".join(f"  {line}".rstrip()
                                             for line in self.epilog.splitlines()) + "\n")


def load_verb(name: str) -> TyperCommand:
    """Import one verb's module and build its click command."""
    module = importlib.import_module(VERBS[name][0])
    sub = typer.Typer(add_completion=False, rich_markup_mode=None, context_settings=_CONTEXT,
                      pretty_exceptions_show_locals=False)
    module.mount(sub)
    (info,) = sub.registered_commands
    info.cls = _VerbCommand
    command = typer.main.get_command(sub)
    for param in command.params:
        if param.param_type_name == "argument" and param.metavar is None:
            param.metavar = param.name.upper()  # RUN_DIR in the usage line and the help alike
    return command


class _DexrlGroup(TyperGroup):
    """Lazy verbs, and every expected failure rendered once: ``error:``/``hint:``, exit 2.

    That covers DexrlError from any command, click's usage errors (unknown verbs and flags,
    missing or invalid values) and a full disk (an ENOSPC/EDQUOT OSError escaping a verb becomes
    the ``disk-full`` DexrlError). A DexrlError of a verb given ``--json`` is also printed as a
    ``dexrl.error/1`` document on stdout, so a script reading stdout gets JSON either way. Ctrl-C
    in a verb prints ``interrupted`` and exits 130 (train and resume answer it themselves).
    """

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = dict.fromkeys(VERBS)  # the names TyperGroup suggests from on a typo

    def get_help_option(self, ctx: Any) -> Any:  # click's signature
        return _cheap_help_option(super().get_help_option(ctx))

    def list_commands(self, ctx: Any) -> list[str]:  # click's signature
        return list(VERBS)

    def get_command(self, ctx: Any, cmd_name: str) -> TyperCommand | None:
        return load_verb(cmd_name) if cmd_name in VERBS else None

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, summary) for name, (_, summary) in VERBS.items()])


    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except typer.TyperException as exc:  # `dexrl --bogus`: before any verb runs
            _usage_error(exc, ctx)

    def invoke(self, ctx):  # noqa: ANN001, ANN201 - click's signature
        try:
            return super().invoke(ctx)
        except DexrlError as exc:
            _fail(exc, ctx)
        except typer.TyperException as exc:
            _usage_error(exc, ctx)
        except KeyboardInterrupt:  # click would print "Aborted!" and exit 1
            typer.echo("interrupted", err=True)
            raise typer.Exit(130) from None
        except (typer.Exit, typer.Abort):  # a verb's own exit status (it said why already)
            raise
        except Exception as exc:  # an ENOSPC OSError, or what was raised while handling one
            full = disk_full_cause(exc)
            if full is None:
                raise
            _fail(disk_full_error(disk_full_folder(full, os.getcwd())), ctx)


def _fail(exc: DexrlError, ctx: Any) -> NoReturn:
    """Print ``exc`` (and its ``dexrl.error/1`` document for a verb given --json); exit 2."""
    typer.echo(exc.render(), err=True)
    if ctx.meta.get(_JSON_META):
        print_json(ERROR_SCHEMA, **exc.document())
    raise typer.Exit(exc.exit_code) from None


def _usage_error(exc: typer.TyperException, ctx: Any) -> NoReturn:
    """Render click's usage errors (typer vendors click) as ``error:``/``hint:``, exit 2."""
    if getattr(exc, "exit_code", None) != 2 or type(exc).__name__ == "NoArgsIsHelpError":
        raise exc
    sub = getattr(exc, "ctx", None)
    where = sub.command_path if sub is not None else ctx.command_path
    typer.echo(f"error: {where}: {exc.format_message()}\n"
               f"hint: `{where} --help` lists the flags and examples", err=True)
    raise typer.Exit(2) from None


app = typer.Typer(
    name="dexrl",
    cls=_DexrlGroup,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    context_settings=_CONTEXT,
    rich_markup_mode=None,
)


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
    """Console entry point (also ``python -m dexrl`` and ``python -m dexrl.cli``)."""
    app(prog_name="dexrl")


if __name__ == "__main__":
    main()
