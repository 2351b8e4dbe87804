"""``--mode`` through the real CLI: the plan of ``dexrl train --dry-run`` (text and JSON) names the
execution mode and writes nothing; ``dexrl configs`` lists the modes. In-process, no Ray."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from helpers.cli import run

REACH_SMOKE = ["train", "--suite", "reach_cued", "--model", "pi0", "--smoke"]


def mode_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.startswith("Mode: ")]
    assert len(lines) == 1, output
    return lines[0]


def wrote_nothing(cwd: Path, run_dir: Path) -> bool:
    return not run_dir.exists() and [p.name for p in cwd.iterdir()] in ([], ["home"])


def plan_document(result: Any) -> dict[str, Any]:
    assert result.exit_code == 0, (result.stdout, result.stderr)
    data = json.loads(result.stdout)  # fails on anything but exactly one document
    assert data["schema"] == "dexrl.train-plan/1", data
    return data


def test_async_dry_run_names_the_mode_and_its_staleness_bound(cwd: Path) -> None:
    run_dir = cwd / "run"
    result = run(*REACH_SMOKE, "--mode", "async", "--dry-run", "--run-dir", run_dir,
                 "algorithm.staleness_threshold=3")
    assert result.exit_code == 0, (result.stdout, result.stderr)
    line = mode_line(result.stdout)
    assert line.startswith("Mode: async (") and line.endswith(")"), line
    assert "AsyncPPOEmbodiedRunner" in line
    assert "at most 3 policy version(s) old" in line, line  # the bound, read from the config
    assert wrote_nothing(cwd, run_dir)


def test_async_dry_run_json_says_the_mode(cwd: Path) -> None:
    run_dir = cwd / "run"
    data = plan_document(run(*REACH_SMOKE, "--mode", "async", "--dry-run", "--json",
                             "--run-dir", run_dir))
    assert data["plan"]["mode"] == "async"
    assert data["config_name"] == "reach_cued_ppo_dexbotic_pi0"
    assert wrote_nothing(cwd, run_dir)


def test_pipeline_dry_run_says_the_mode_in_text_and_json(cwd: Path) -> None:
    data = plan_document(run(*REACH_SMOKE, "--mode", "pipeline", "--dry-run", "--json"))
    assert data["plan"]["mode"] == "pipeline"
    text = run(*REACH_SMOKE, "--mode", "pipeline", "--dry-run")
    assert mode_line(text.stdout).startswith("Mode: pipeline (")


def test_sync_is_the_default_mode_of_a_dry_run(cwd: Path) -> None:
    run_dir = cwd / "run"
    result = run(*REACH_SMOKE, "--dry-run", "--run-dir", run_dir)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    line = mode_line(result.stdout)
    assert line.startswith("Mode: sync"), line
    assert "async" not in line and "staleness" not in line and "policy version" not in line
    assert wrote_nothing(cwd, run_dir)


def test_train_with_an_unknown_mode_is_one_error_and_writes_nothing(cwd: Path) -> None:
    run_dir = cwd / "run"
    result = run(*REACH_SMOKE, "--mode", "bogus", "--dry-run", "--run-dir", run_dir)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "[flags-mode-unknown]" in errors[0], result.stderr
    assert "Traceback" not in result.output and "Mode:" not in result.stdout
    assert wrote_nothing(cwd, run_dir)


def test_configs_names_the_modes_after_the_table() -> None:
    result = run("configs")
    assert result.exit_code == 0, (result.stdout, result.stderr)
    lines = result.stdout.splitlines()
    found = [i for i, line in enumerate(lines) if line.startswith("Execution modes")]
    assert len(found) == 1, result.stdout
    line = lines[found[0]]
    assert "--mode" in line
    for mode in ("sync", "async", "pipeline"):
        assert re.search(rf"\b{mode} \(", line), (mode, line)
    table_rows = [i for i, text in enumerate(lines) if "reach_cued_ppo_dexbotic_pi0" in text]
    assert table_rows and max(table_rows) < found[0]  # after the table


def test_configs_json_lists_the_modes() -> None:
    result = run("configs", "--json")
    assert result.exit_code == 0, (result.stdout, result.stderr)
    data = json.loads(result.stdout)
    assert data["schema"] == "dexrl.configs/1"
    assert data["modes"] == ["sync", "async", "pipeline"]
    assert data["configs"]  # the rows are still there
