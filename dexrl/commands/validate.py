"""``dexrl validate``: compose a config and check it, with no Ray, GPU or rlinf import."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from dexrl.errors import DexrlError, one_line

if TYPE_CHECKING:
    from rich.console import Console

    from dexrl.config.validate import Validated

EPILOG = """\
Examples:

  dexrl validate --suite libero_spatial --model pi0
      Config libero_spatial_ppo_dexbotic_pi0 is well-formed (0 errors, 2 warnings).

  dexrl validate --suite libero_goal --model dm0 env.train.total_num_envs=30 --print

  dexrl validate --config-name libero_10_ppo_dexbotic_pi0 cluster.num_nodes=2 --gpus-per-node 4

  dexrl validate --explain actor.optim.lr
      actor.optim.lr
        type:     float
        range:    > 0
        default:  5e-06 (in libero_spatial_ppo_dexbotic_pi0)
        meaning:  AdamW learning rate of the policy.
"""


DEFAULT_EXPLAIN = ("libero_spatial", "pi0")  # the config --explain reads defaults from


def report(result: Validated, console: Console, strict: bool) -> int:
    """Print findings; return the exit code (0 clean, 2 on errors or strict warnings)."""
    from omegaconf import OmegaConf
    from rich.markup import escape

    errs = [f for f in result.findings if f.level == "error"]
    warns = [f for f in result.findings if f.level == "warning"]
    for f in errs:
        console.print(f"[bold red]error[/]: {escape(f.where)}: {escape(f.message)}\n"
                      f"  [dim]hint:[/] {escape(f.hint)}", highlight=False)
    for f in warns:
        tag = "[bold red]error (strict)[/]" if strict else "[yellow]warning[/]"
        console.print(f"{tag}: {escape(f.where)}: {escape(f.message)}\n"
                      f"  [dim]hint:[/] {escape(f.hint)}", highlight=False)
    mode = OmegaConf.select(result.cfg, "actor.model.dexbotic.norm_mode", default=None,
                            throw_on_resolution_failure=False)
    console.print(f"norm mode: {mode or 'mean_std (unset, the default)'} "
                  "(actor.model.dexbotic.norm_mode)", highlight=False)
    failed = bool(errs) or (strict and bool(warns))
    summary = f"({len(errs)} error(s), {len(warns)} warning(s))"
    if failed:
        console.print(f"[bold red]Config {result.name} has problems[/] {summary}", highlight=False)
        return 2
    console.print(f"[green]Config {result.name} is well-formed[/] {summary}", highlight=False)
    return 0


def validate(
    suite: str = typer.Option(None, "--suite", "-s", help="LIBERO suite, e.g. libero_spatial."),
    model: str = typer.Option(None, "--model", "-m",
                              help="Policy: pi0, dm0 or a plugin's (`dexrl configs` lists them)."),
    config_name: str = typer.Option(None, "--config-name", "-c",
                                    help="A shipped config name instead of --suite/--model."),
    overrides: list[str] = typer.Argument(None, help="Hydra overrides, key=value."),
    print_cfg: bool = typer.Option(False, "--print", help="Print the resolved config as YAML."),
    strict: bool = typer.Option(False, "--strict", help="Treat warnings as errors."),
    gpus_per_node: int = typer.Option(8, "--gpus-per-node", min=1,
                                      help="GPUs per node assumed for placement checks."),
    explain: str = typer.Option(None, "--explain", metavar="KEY",
                                help="Describe one config key: type, range or choices, default "
                                "(in the chosen config, else libero_spatial pi0) and meaning."),
) -> None:
    """Compose and check a training config (no Ray, no GPU, no rlinf import)."""
    from rich.console import Console

    from dexrl.config.compose import to_yaml
    from dexrl.config.validate import compose_and_check

    if explain:
        show_key(explain, suite, model, config_name, overrides or [])
        return
    result = compose_and_check(suite, model, config_name, overrides or [], gpus_per_node)
    out = Console(highlight=False, soft_wrap=True)
    if print_cfg:
        try:
            out.print(to_yaml(result.cfg), markup=False, soft_wrap=True)
        except Exception as exc:  # an interpolation that cannot resolve
            raise DexrlError(f"config does not resolve: {one_line(exc, typed=False)}",
                             "fix the interpolation or the override that feeds it",
                             code="config-does-not-resolve") from None
    raise typer.Exit(report(result, Console(stderr=True, highlight=False, soft_wrap=True), strict))


def show_key(key: str, suite: str | None, model: str | None, config_name: str | None,
             overrides: list[str]) -> None:
    """Print what the value schema says about ``key``, with its value in the composed config."""
    from dexrl.config.compose import compose, resolve_config_name
    from dexrl.config.schema import explain

    if not (suite or model or config_name):
        suite, model = DEFAULT_EXPLAIN
    name = resolve_config_name(suite, model, config_name)
    typer.echo("\n".join(explain(key, compose(name, overrides), name)))


def mount(app: typer.Typer) -> None:
    """Add the verb to the app."""
    app.command("validate", epilog=EPILOG)(validate)
