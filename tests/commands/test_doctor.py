"""`dexrl doctor` through the real CLI: exit codes, output formats, bad input (fake areas)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
from helpers import cli
from typer.testing import CliRunner

from dexrl.cli import app
from dexrl.doctor import CheckResult, fail, ok, warn
from dexrl.doctor import schedule as doctor_runner
from dexrl.doctor.context import Context
from dexrl.doctor.schedule import Area, config_area

runner = CliRunner()


run = partial(cli.run, "doctor")


def fake_areas(*rows: CheckResult, seen: list[Context] | None = None):
    """Replace every real area: the config row stays real, the rest is ``rows``."""
    def fake(findings):  # noqa: ANN001, ANN202 - mirrors runner.areas
        def machine(ctx: Context) -> Iterator[CheckResult]:
            if seen is not None:
                seen.append(ctx)
            yield from rows
        return [Area("config", config_area(findings), ("config.checks",)),
                Area("machine", machine, tuple(r.id for r in rows))]
    return fake


@pytest.fixture
def healthy(monkeypatch: pytest.MonkeyPatch) -> list[Context]:
    seen: list[Context] = []
    monkeypatch.setattr(doctor_runner, "areas", fake_areas(
        ok("stack.versions", "fine"), warn("stack.mujoco", "3.3.7", "pin 3.3.2"), seen=seen))
    return seen


def test_help_has_examples() -> None:
    result = runner.invoke(app, ["doctor", "--help"])
    assert result.exit_code == 0
    assert "dexrl doctor --quick" in result.output


def test_warnings_alone_exit_0_and_budget_is_printed(healthy: list[Context]) -> None:
    result = run("--quick", "--budget", "42")
    assert result.exit_code == 0, result.output
    assert "nothing failed: 0 fail, 1 warn, 1 ok, 1 skip" in result.output
    assert "(budget 42 s)" in result.output
    assert healthy[0].quick is True and healthy[0].cfg is None


def test_a_failure_exits_1(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor_runner, "areas", fake_areas(
        ok("stack.versions", "fine"), fail("cuda.devices", "no CUDA", "use a GPU machine")))
    result = run()
    assert result.exit_code == 1
    assert "use a GPU machine" in result.output
    assert "some checks failed" in result.output


def test_a_crashing_area_is_a_fail_row_not_a_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(_: Context) -> Iterator[CheckResult]:
        raise OSError("disk on fire")
        yield  # pragma: no cover

    monkeypatch.setattr(doctor_runner, "areas", lambda findings: [
        Area("config", config_area(findings), ("config.checks",)),
        Area("bad", boom, ("bad.one",))])
    result = run("--json")
    assert result.exit_code == 1
    row = json.loads(result.stdout)["checks"][1]
    assert row["id"] == "bad.one" and row["status"] == "fail"
    assert row["finding"] == "probe crashed: OSError: disk on fire"


def test_config_is_composed_and_checked(healthy: list[Context]) -> None:
    result = run("--suite", "libero_goal", "--model", "pi0", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["checks"][0]["id"] == "config.checks"
    assert doc["checks"][0]["status"] in ("ok", "warn")
    assert doc["options"]["config"] == "libero_goal_ppo_dexbotic_pi0"
    ctx = healthy[0]
    assert ctx.suite == "libero_goal"
    assert ctx.ckpt is not None and ctx.ckpt.name == "libero-db-pi0"


def test_mode_and_algo_change_the_composed_config(healthy: list[Context]) -> None:
    from dexrl.config.algorithms import algorithm_of
    from dexrl.config.modes import run_mode

    result = run("--suite", "libero_goal", "--model", "pi0", "--mode", "async", "--algo",
                 "grpo", "--json")
    assert result.exit_code in (0, 1), result.output
    cfg = healthy[0].cfg
    assert run_mode(cfg) == "async"
    assert algorithm_of(cfg) == "grpo"


def test_without_mode_and_algo_the_shipped_config_is_composed(healthy: list[Context]) -> None:
    from dexrl.config.algorithms import algorithm_of
    from dexrl.config.modes import run_mode

    assert run("--suite", "libero_goal", "--model", "pi0", "--json").exit_code == 0
    assert (run_mode(healthy[0].cfg), algorithm_of(healthy[0].cfg)) == ("sync", "ppo")


def test_config_errors_fail(healthy: list[Context]) -> None:
    result = run("--config-name", "libero_goal_ppo_dexbotic_pi0",
                 "actor.global_batch_size=1000", "--json")
    assert result.exit_code == 1
    row = json.loads(result.stdout)["checks"][0]
    assert row["status"] == "fail" and "actor.global_batch_size" in row["finding"]


def test_ckpt_path_is_used(healthy: list[Context], tiny_pi0_dir: Path) -> None:
    result = run("--suite", "libero_10", "--model", "pi0", "--ckpt", str(tiny_pi0_dir))
    assert result.exit_code == 0, result.output
    assert healthy[0].ckpt == tiny_pi0_dir.resolve()
    assert healthy[0].settings.actor.model.model_path == str(tiny_pi0_dir.resolve())


def test_a_bad_ckpt_fails_the_config_row(healthy: list[Context], tmp_path: Path) -> None:
    result = run("--suite", "libero_10", "--model", "pi0", "--ckpt", str(tmp_path), "--json")
    assert result.exit_code == 1
    row = json.loads(result.stdout)["checks"][0]
    assert row["status"] == "fail" and "config.json" in row["finding"]


def test_markdown(healthy: list[Context]) -> None:
    result = run("--markdown")
    assert result.exit_code == 0
    assert result.stdout.startswith("### `dexrl doctor` report")
    assert "| stack.mujoco | warn | 3.3.7 | pin 3.3.2 |" in result.stdout


def test_json_is_the_only_output(healthy: list[Context]) -> None:
    result = run("--json")
    doc = json.loads(result.stdout)
    assert doc["schema"] == "dexrl.doctor/1"
    assert [c["id"] for c in doc["checks"]] == ["config.checks", "stack.versions",
                                               "stack.mujoco"]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize(("args", "code"), [
    (["--json", "--markdown"], "flags-json-markdown"),
    (["--suite", "libero_goal", "--model", "pi0", "runner.max_stepz=3"],
     "override-unknown-key"),
    (["--model", "pi0"], "config-selection-incomplete"),
    (["--suite", "libero_spatil"], "unknown-suite"),
    (["runner.max_steps=3"], "doctor-overrides-need-config"),
    (["--mode", "async"], "doctor-overrides-need-config"),
    (["--suite", "libero_goal", "--model", "pi0", "--mode", "asink"], "flags-mode-unknown"),
    (["--suite", "libero_goal", "--model", "pi0", "--algo", "dpo"], "flags-algo-unknown"),
    (["--ckpt", "/no/such/checkpoint"], "checkpoint-not-found"),
    (["--ray-address", "127.0.0.1:{port}"], "ray-unreachable"),
])
def test_bad_input_exits_2(healthy: list[Context], args: list[str], code: str) -> None:
    args = [a.format(port=_closed_port()) for a in args]
    result = run(*args)
    assert result.exit_code == 2, result.output
    assert f"[{code}]" in result.stderr
    assert "hint:" in result.stderr
    assert not healthy  # nothing ran


def test_unknown_flag_exits_2() -> None:
    result = run("--frobnicate")
    assert result.exit_code == 2
    assert "No such option" in result.output


def test_ray_address_from_the_environment(healthy: list[Context]) -> None:
    result = runner.invoke(app, ["doctor"],
                           env={"COLUMNS": "250", "RAY_ADDRESS": f"127.0.0.1:{_closed_port()}"})
    assert result.exit_code == 2
    assert "[ray-unreachable]" in result.stderr


@pytest.mark.slow
def test_real_quick_doctor_on_this_machine() -> None:
    """Every real probe, no fakes: on this CPU machine CUDA fails, the rest tells the truth."""
    result = run("--quick", "--json", "--budget", "240")
    doc = json.loads(result.stdout)
    status = {c["id"]: c["status"] for c in doc["checks"]}
    assert result.exit_code == doc["exit_code"] == 1  # no GPU: cuda.devices fails
    assert status["cuda.devices"] == "fail"
    assert status["stack.versions"] == "ok"
    assert status["libero.import"] == "ok" and status["libero.env"] == "skip"
    assert status["ray.nodes"] == "ok"
    assert status["extension.roundtrip"] in ("ok", "fail")  # ran, whatever the registry holds
    assert doc["elapsed_s"] <= 240
