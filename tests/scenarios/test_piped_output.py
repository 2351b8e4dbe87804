"""Output that survives pipes: tables keep every id, path and number whole off a terminal, and
``--json`` gives scripts one document on stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dexrl.cli import app
from dexrl.config.compose import list_configs

runner = CliRunner()
DEXRL = str(Path(sys.executable).with_name("dexrl"))


def piped(*args: str, home: Path) -> subprocess.CompletedProcess:
    """``dexrl ARGS | cat`` on a narrow window: stdout is a pipe, $COLUMNS says 40."""
    env = {**os.environ, "COLUMNS": "40", "DEXRL_HOME": str(home)}
    return subprocess.run([DEXRL, *args], env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.spawns
def test_download_list_through_a_pipe_is_not_truncated(tmp_path: Path) -> None:
    from dexrl.hub.repos import KNOWN_REPOS

    done = piped("download", "--list", home=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "…" not in done.stdout
    for repo in KNOWN_REPOS.values():
        assert repo.repo_id in done.stdout and repo.description in done.stdout


@pytest.mark.spawns
def test_configs_json_through_a_pipe(tmp_path: Path) -> None:
    done = piped("configs", "--json", home=tmp_path)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)  # nothing but the document on stdout
    assert data["schema"] == "dexrl.configs/1" and data["problems"] == []
    assert sorted(c["config_name"] for c in data["configs"]) == sorted(list_configs())
    spatial = next(c for c in data["configs"]
                   if c["config_name"] == "libero_spatial_ppo_dexbotic_pi0")
    assert spatial == {"suite": "libero_spatial", "model": "pi0", "model_type": "dexbotic_pi0",
                       "config_name": "libero_spatial_ppo_dexbotic_pi0", "algorithm": "ppo",
                       "eval_horizon": 220, "from": "dexrl"}
    assert data["algorithms"] == ["ppo", "grpo"]
    assert data["noise_methods"] == ["flow_sde", "flow_noise"]


def test_configs_table_captured_by_clirunner_keeps_every_name() -> None:
    result = runner.invoke(app, ["configs"], env={"COLUMNS": "30"})
    assert result.exit_code == 0, result.output
    assert "…" not in result.output
    for name in list_configs():
        assert name in result.output


def test_download_list_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEXRL_HOME", str(tmp_path))
    result = runner.invoke(app, ["download", "--list", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["schema"] == "dexrl.download.list/1"
    pi0 = next(r for r in data["repositories"] if r["repo_id"] == "Dexmal/libero-db-pi0")
    assert pi0["path"] == str(tmp_path / "checkpoints" / "Dexmal" / "libero-db-pi0")
    assert (pi0["verified"], pi0["commit"], pi0["model_type"]) == (False, None, "dexbotic_pi0")


@pytest.mark.parametrize(
    ("args", "code"),
    [(["--list", "Dexmal/libero-db-pi0"], "flags-list-exclusive"),
     (["--list", "--json", "--force"], "flags-list-exclusive"),
     (["--libero-assets", "--json"], "flags-libero-assets-exclusive"),
     (["--json"], "download-no-repo-id")],
)
def test_download_flag_combinations_that_make_no_sense(tmp_path: Path, args: list[str],
                                                       code: str) -> None:
    result = runner.invoke(app, ["download", *args], env={"DEXRL_HOME": str(tmp_path)})
    assert result.exit_code == 2, result.output
    assert f"[{code}]" in result.stderr and "hint:" in result.stderr
    assert list(tmp_path.iterdir()) == []
    if "--json" in args:  # a script reading stdout gets the failure as JSON
        assert json.loads(result.stdout)["schema"] == "dexrl.error/1"
    else:
        assert result.stdout == ""
