"""``dexrl doctor``: prove that this machine and its Ray cluster can run a launch, before one."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from dexrl.catalog import get_suite
from dexrl.cluster import check_address
from dexrl.commands import options
from dexrl.config.request import ConfigRequest
from dexrl.console import console
from dexrl.errors import DexrlError

if TYPE_CHECKING:
    from dexrl.doctor.context import Context
    from dexrl.errors import Finding

EPILOG = """\
Examples:

  dexrl doctor --quick
      One row per check (config, stack, cuda, render, libero, ray, extension, checkpoint), each
      ok / warn / fail / skip with the finding and, when not ok, the fix. Exit 1 if any failed.

  dexrl doctor --suite libero_spatial --model pi0 --ckpt Dexmal/libero-db-pi0
      Also checks that config's placement, env memory, checkpoint and disk, and steps one env.

  dexrl doctor -c libero_10_ppo_dexbotic_pi0 --ray-address 10.0.0.1:6379 cluster.num_nodes=2
      Attaches to that Ray cluster: nodes alive, RLINF_NODE_RANK, the round trip on every node.

  dexrl doctor --quick --markdown > doctor.md
      A block to paste into a bug report (versions, GPUs, driver, variables, results).

  dexrl doctor --json | jq '.checks[] | select(.status == "fail")'
      The stable JSON document (schema dexrl.doctor/1, see docs/cli.md).
"""


def build_context(request: ConfigRequest, ckpt: str | None, ray_address: str | None,
                  quick: bool, budget: float) -> tuple[Context, list[Finding] | None]:
    """Compose the chosen config (bad input raises DexrlError) and gather the run's inputs.

    Returns:
        The context and the config findings (``None`` without a config).
    """
    from dexrl.checkpoints.sources import locate_checkpoint
    from dexrl.config.compose import suite_of
    from dexrl.config.validate import compose_and_check
    from dexrl.doctor.context import DEFAULT_SUITE, Budget, Context

    ctx = Context(Budget(budget), suite=DEFAULT_SUITE, ray_address=ray_address or None,
                  quick=quick)
    ckpt_path = locate_checkpoint(ckpt) if ckpt else None
    if request.names_config:
        request = replace(request, ckpt_path=ckpt_path)
        validated = compose_and_check(request.suite, request.model, request.config_name,
                                      request.hydra_overrides())
        ctx.cfg, ctx.config_name = validated.cfg, validated.name
        ctx.suite = suite_of(validated.cfg, request.suite) or DEFAULT_SUITE
        path = validated.settings.actor.model.model_path if validated.settings else None
        ctx.ckpt = ckpt_path or (Path(str(path)).expanduser() if path else None)
        return ctx, validated.findings
    if request.hydra_overrides():  # --mode, --algo and --noise change a config too
        raise DexrlError("overrides need a config", "add --suite S --model M or --config-name "
                         "NAME", where="overrides", code="doctor-overrides-need-config")
    if request.suite:
        ctx.suite = get_suite(request.suite).name
    ctx.ckpt = ckpt_path
    return ctx, None


def doctor(
    suite: str = options.suite(),
    model: str = options.model(),
    config_name: str = options.config_name(),
    ckpt: str = options.ckpt(),
    ray_address: str = options.ray_address(),
    as_json: bool = typer.Option(False, "--json", help="Print the JSON document only."),
    markdown: bool = typer.Option(False, "--markdown", help="Print a bug-report block only."),
    quick: bool = typer.Option(False, "--quick",
                               help="Skip the slow probes (LIBERO env step, renders per GPU)."),
    budget: float = typer.Option(300.0, "--budget", min=10.0,
                                 help="Seconds for everything; doctor never runs longer."),
    overrides: list[str] = options.overrides(),
    mode: str = options.mode(),
    algo: str = options.algo(),
    noise: str = options.noise(),
) -> None:
    """Check this machine and its Ray cluster for a launch: every check ok / warn / fail / skip."""
    # Imported here so that `dexrl --help` does not pay for the doctor's modules.
    from rich.console import Console

    from dexrl.doctor.report import exit_code, print_table, relevant_env, to_json, to_markdown
    from dexrl.doctor.schedule import areas, run_doctor

    if as_json and markdown:
        raise DexrlError("--json and --markdown are exclusive", "pick one output format",
                         code="flags-json-markdown")
    request = ConfigRequest(suite=suite, model=model, config_name=config_name, mode=mode,
                            algo=algo, noise=noise, overrides=tuple(overrides or ()))
    ctx, findings = build_context(request, ckpt, ray_address, quick, budget)
    if ctx.ray_address:
        check_address(ctx.ray_address, connect_timeout=min(60.0, budget / 2))
    ctx.facts["env"] = relevant_env()  # before Ray adds variables of its own
    err = Console(stderr=True, highlight=False)
    if sys.stderr.isatty() and not (as_json or markdown):
        with err.status(f"dexrl doctor: running checks (budget {budget:.0f} s)…"):
            rows = run_doctor(ctx, areas(findings))
    else:
        rows = run_doctor(ctx, areas(findings))
    elapsed = ctx.budget.elapsed()
    if as_json:
        typer.echo(to_json(rows, ctx, elapsed))
    elif markdown:
        typer.echo(to_markdown(rows, ctx, elapsed), nl=False)
    else:
        print_table(rows, elapsed, budget, console(soft_wrap=False))
    raise typer.Exit(exit_code(rows))


def mount(app: typer.Typer) -> None:
    """Add the verb to the app."""
    app.command("doctor", epilog=EPILOG)(doctor)
