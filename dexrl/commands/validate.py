"""``dexrl validate``: compose a config and check it, with no Ray, GPU or rlinf import."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from dexrl.commands import options
from dexrl.config.request import ConfigRequest
from dexrl.console import print_json
from dexrl.errors import DexrlError, one_line

if TYPE_CHECKING:
    from collections.abc import Callable

    from rich.console import Console

    from dexrl.config.validate import Validated

EPILOG = """\
Examples:

  dexrl validate --suite libero_spatial --model pi0
      Config libero_spatial_ppo_dexbotic_pi0 is well-formed (0 error(s), 0 warning(s)); until
      `dexrl download Dexmal/libero-db-pi0`, one warning says the checkpoint is not there.

  dexrl validate --suite reach_cued --model pi0 env.train.total_num_envs=64
      A built-in task's config (reach, reach_cued), with an override: the same checks.

  dexrl validate --suite libero_goal --model dm0 env.train.total_num_envs=30 --print

  dexrl validate --config-name libero_10_ppo_dexbotic_pi0 cluster.num_nodes=2 --gpus-per-node 4

  dexrl validate --suite libero_spatial --model pi0 --mode async --print
      RLinf's async PPO (conf/mode/async.yaml): the decoupled loss, staleness bound and the
      actor on GPUs 0-3, env and rollout on 4-7 (docs/execution-modes.md).

  dexrl validate --suite libero_spatial --model pi0 --json | jq '.findings[] | .code'
      The same check as one JSON document (schema dexrl.validate/1): ok, counts, findings.

  dexrl validate --explain actor.optim.lr
      actor.optim.lr
        type:     float
        range:    > 0
        default:  5e-06 (in libero_spatial_ppo_dexbotic_pi0)
        meaning:  AdamW learning rate of the policy.
"""


DEFAULT_EXPLAIN = ("libero_spatial", "pi0")  # the config --explain reads defaults from
SCHEMA = "dexrl.validate/1"


def outcome(result: Validated, strict: bool) -> dict[str, Any]:
    """What the check concludes, as data: the text report and ``--json`` both show it.

    Findings are listed errors first, then warnings (``--strict`` fails on warnings too).
    """

    errs = [f for f in result.findings if f.level == "error"]
    warns = [f for f in result.findings if f.level == "warning"]
    return {"config_name": result.name, "ok": not (errs or (strict and warns)),
            "strict": strict, "errors": len(errs), "warnings": len(warns),
            "norm_mode": result.norm_mode(),
            "findings": [f.document() for f in (*errs, *warns)]}


def report(result: Validated, console: Console, strict: bool) -> int:
    """Print findings; return the exit code (0 clean, 2 on errors or strict warnings)."""
    from rich.markup import escape

    done = outcome(result, strict)
    for f in done["findings"]:
        tag = ("[bold red]error[/]" if f["level"] == "error" else
               "[bold red]error (strict)[/]" if strict else "[yellow]warning[/]")
        console.print(f"{tag}: {escape(f['where'])}: {escape(f['message'])}\n"
                      f"  [dim]hint:[/] {escape(f['hint'])}", highlight=False)
    mode = done["norm_mode"]
    console.print(f"norm mode: {mode['value'] if mode['set'] else 'mean_std (unset, the default)'}"
                  f" ({mode['key']})", highlight=False)
    summary = f"({done['errors']} error(s), {done['warnings']} warning(s))"
    if not done["ok"]:
        console.print(f"[bold red]Config {result.name} has problems[/] {summary}", highlight=False)
        return 2
    console.print(f"[green]Config {result.name} is well-formed[/] {summary}", highlight=False)
    return 0


def validate(
    suite: str = options.suite(),
    model: str = options.model(),
    config_name: str = options.config_name(),
    overrides: list[str] = options.overrides(),
    print_cfg: bool = typer.Option(False, "--print", help="Print the resolved config as YAML "
                                   "(with --json: under \"config\" in the document)."),
    strict: bool = typer.Option(False, "--strict", help="Treat warnings as errors."),
    gpus_per_node: int = typer.Option(8, "--gpus-per-node", min=1,
                                      help="GPUs per node assumed for placement checks."),
    explain: str = typer.Option(None, "--explain", metavar="KEY",
                                help="Describe one config key: type, range or choices, default "
                                "(in the chosen config, else libero_spatial pi0) and meaning."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document (schema "
                                 f"{SCHEMA}) instead of text; exit 2 as without it."),
    mode: str = options.mode(),
    algo: str = options.algo(),
    noise: str = options.noise(),
) -> None:
    """Compose and check a training config (no Ray, no GPU, no rlinf import)."""
    from omegaconf import OmegaConf
    from rich.console import Console

    from dexrl.config.compose import to_yaml
    from dexrl.config.validate import compose_and_check

    if explain and as_json:
        raise DexrlError("--explain prints a description for people and takes no --json",
                         "drop --json to read it, or drop --explain to check the config",
                         code="flags-explain-json")
    overrides = ConfigRequest(suite=suite, model=model, config_name=config_name, mode=mode,
                              algo=algo, noise=noise,
                              overrides=tuple(overrides or ())).hydra_overrides()
    if explain:
        show_key(explain, suite, model, config_name, overrides)
        return
    result = compose_and_check(suite, model, config_name, overrides, gpus_per_node)
    if as_json:
        done = outcome(result, strict)
        if print_cfg:  # the resolved config as data, in the same document
            done["config"] = _resolved(lambda: OmegaConf.to_container(result.cfg, resolve=True))
        print_json(SCHEMA, **done)
        raise typer.Exit(0 if done["ok"] else 2)
    out = Console(highlight=False, soft_wrap=True)
    if print_cfg:
        out.print(_resolved(lambda: to_yaml(result.cfg)), markup=False, soft_wrap=True)
    raise typer.Exit(report(result, Console(stderr=True, highlight=False, soft_wrap=True), strict))


def _resolved(convert: Callable[[], Any]) -> Any:
    """``convert()`` of the composed config (its YAML or its resolved container); a config whose
    interpolations cannot resolve is one ``config-does-not-resolve`` error."""
    try:
        return convert()
    except Exception as exc:  # an interpolation that cannot resolve
        raise DexrlError(f"config does not resolve: {one_line(exc, typed=False)}",
                         "fix the interpolation or the override that feeds it",
                         code="config-does-not-resolve") from None


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
