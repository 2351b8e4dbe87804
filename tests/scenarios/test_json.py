"""`--json` on every verb that prints a result: exactly one versioned document on stdout with
what the text says, and an expected failure as the `dexrl.error/1` document (stdout) beside its
`error:` line (stderr), exit 2. In-process through the app; no Ray, no subprocess.

The schemas and their fields: docs/cli.md (the `--json` conventions and each verb's section).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import run
from typer.testing import CliRunner

from dexrl.runs.layout import CURVES, MARKER, checkpoints_dir

runner = CliRunner()
SPATIAL_PI0 = ["--suite", "libero_spatial", "--model", "pi0"]
PLOT_FIXTURE = Path(__file__).parent.parent / "fixtures" / "smoke_run"


def document(result: Any, schema: str, exit_code: int = 0) -> dict[str, Any]:
    """The one JSON document on stdout (nothing else there), of ``schema``."""
    assert result.exit_code == exit_code, (result.stdout, result.stderr)
    data = json.loads(result.stdout)  # fails on anything but exactly one document
    assert data["schema"] == schema, data
    return data


def failure(result: Any, code: str) -> dict[str, Any]:
    """An expected failure of a verb given --json: the error document on stdout, the error line
    with its code on stderr, exit 2."""
    data = document(result, "dexrl.error/1", exit_code=2)
    assert data["code"] == code, data
    assert set(data) == {"schema", "code", "message", "where", "hint", "details"}
    assert f"[{code}]" in result.stderr and "hint:" in result.stderr
    assert "Traceback" not in result.stderr
    return data


# --- validate -------------------------------------------------------------------------------


def test_validate_json_lists_the_findings_with_their_codes(cwd: Path) -> None:
    data = document(run("validate", *SPATIAL_PI0, "--json"), "dexrl.validate/1")
    assert data["config_name"] == "libero_spatial_ppo_dexbotic_pi0"
    assert (data["ok"], data["strict"], data["errors"]) == (True, False, 0)
    assert data["warnings"] == len(data["findings"]) > 0
    assert data["norm_mode"]["key"] == "actor.model.dexbotic.norm_mode"
    for finding in data["findings"]:
        assert set(finding) == {"level", "code", "where", "message", "hint"}
        assert finding["level"] == "warning" and finding["code"]
    assert "config" not in data
    assert run("validate", *SPATIAL_PI0).exit_code == 0  # the text agrees


def test_validate_json_of_a_config_with_errors_is_the_report_and_exit_2(cwd: Path) -> None:
    result = run("validate", *SPATIAL_PI0, "actor.model.num_steps=0", "--json")
    data = document(result, "dexrl.validate/1", exit_code=2)
    assert data["ok"] is False and data["errors"] >= 1
    errors = [f for f in data["findings"] if f["level"] == "error"]
    assert any(f["where"] == "actor.model.num_steps" for f in errors)
    assert data["findings"][:len(errors)] == errors  # errors first, as the text prints them
    strict = document(run("validate", *SPATIAL_PI0, "--strict", "--json"), "dexrl.validate/1",
                      exit_code=2)
    assert (strict["ok"], strict["strict"], strict["errors"]) == (False, True, 0)


def test_validate_json_with_print_carries_the_resolved_config(cwd: Path) -> None:
    data = document(run("validate", *SPATIAL_PI0, "--print", "--json",
                        "actor.optim.lr=1e-6"), "dexrl.validate/1")
    assert data["config"]["actor"]["optim"]["lr"] == 1e-6


@pytest.mark.parametrize(("args", "code"), [
    (["--suite", "nope", "--model", "pi0"], "unknown-suite"),
    ([*SPATIAL_PI0, "--explain", "actor.optim.lr"], "flags-explain-json"),
])
def test_validate_json_failures(cwd: Path, args: list[str], code: str) -> None:
    failure(run("validate", *args, "--json"), code)


# --- train --dry-run ------------------------------------------------------------------------


def test_train_dry_run_json_is_the_plan(cwd: Path) -> None:
    result = run("train", *SPATIAL_PI0, "--dry-run", "--json", "--gpus-per-node", "4")
    data = document(result, "dexrl.train-plan/1")
    assert (data["config_name"], data["gpus_per_node"], data["smoke"]) == (
        "libero_spatial_ppo_dexbotic_pi0", 4, False)
    plan = data["plan"]
    assert plan["placement"]["actor"] == [{"node": 0, "gpu": g} for g in range(4)]
    assert plan["per_node"] == [{"node": 0, "ranks": {"actor": 4, "env": 4, "rollout": 4}}]
    assert plan["per_global_step"]["env_steps"] == 122_880  # as test_train's text says
    assert plan["per_global_step"]["training_samples"] == 24_576
    assert plan["per_global_step"]["optimizer_steps"] == 96
    assert plan["checkpoints"]["saves"] >= 1 and plan["checkpoints"]["gb_each"] > 0
    assert [(m["node"], m["gpu"]) for m in plan["memory_gb_per_gpu"]] == [(0, g) for g in range(4)]
    assert data["global_steps"] == 300
    assert "checkpoint-not-found" in {f["code"] for f in data["findings"]}  # no download here
    run_dir = Path(data["run_dir"])
    assert run_dir.parent == cwd / "runs"
    assert data["run_folder_settings"]["runner.logger.log_path"] == str(run_dir)
    assert "--dry-run" not in data["launch_command"] and "--json" not in data["launch_command"]
    assert [p.name for p in cwd.iterdir()] in ([], ["home"])  # nothing written


def test_train_smoke_dry_run_json_sizes_the_tiny_model(cwd: Path) -> None:
    data = document(run("train", *SPATIAL_PI0, "--smoke", "--dry-run", "--json"),
                    "dexrl.train-plan/1")
    assert data["smoke"] is True and data["gpus_per_node"] == 1
    assert 0 < data["plan"]["model"]["parameters"] < 10_000_000


def test_train_json_needs_dry_run_and_starts_nothing(cwd: Path) -> None:
    data = failure(run("train", *SPATIAL_PI0, "--smoke", "--json"), "flags-json-needs-dry-run")
    assert "--dry-run" in data["hint"]
    assert [p.name for p in cwd.iterdir()] in ([], ["home"])


def test_train_dry_run_json_of_a_broken_config(cwd: Path) -> None:
    data = failure(run("train", *SPATIAL_PI0, "--dry-run", "--json",
                       "env.train.total_num_envs=63"), "config-invalid")
    assert data["details"]


# --- resume --dry-run -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def one_step_source(tiny_pi0_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A smoke-like run of 3 steps whose complete global_step_1 is its latest checkpoint."""
    from helpers.rlinf_run import write_tiny_rlinf_run

    root = tmp_path_factory.mktemp("made") / "runs" / "one_step"
    base = Path(shutil.copytree(tiny_pi0_dir, root / "smoke-checkpoint"))
    return write_tiny_rlinf_run(root, base, step=1,
                                overrides=("runner.max_steps=3", "runner.max_epochs=3"))


@pytest.fixture
def one_step(one_step_source: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(one_step_source, tmp_path / "runs" / "one_step"))


def tree(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*")}


def test_resume_dry_run_json_names_the_checkpoint_steps_and_changes(one_step: Path) -> None:
    before = tree(one_step)
    data = document(run("resume", one_step, "--dry-run", "--json", "runner.max_steps=4",
                        "runner.max_epochs=4"), "dexrl.resume-plan/1")
    step_1 = checkpoints_dir(one_step) / "global_step_1"
    assert data["run_dir"] == str(one_step)
    assert data["checkpoint"] == {"step": 1, "path": str(step_1)}
    assert (data["restart"], data["from_step"], data["to_step"]) == (False, 1, 4)
    changes = {c["key"]: c for c in data["config_changes"]}
    assert changes["runner.max_steps"] == {"key": "runner.max_steps", "old": 3, "new": 4,
                                           "change": "changed", "set_by_dexrl": False}
    assert changes["runner.resume_dir"]["new"] == str(step_1)
    assert changes["runner.resume_dir"]["set_by_dexrl"] is True
    assert tree(one_step) == before  # nothing written


def test_resume_dry_run_json_of_a_run_without_a_complete_checkpoint(one_step: Path) -> None:
    """An unmarked step is never trained over without --move-aside (issue 46); with it, the
    dry run plans the restart from step 0 and names the folder it would move, moving nothing."""
    (checkpoints_dir(one_step) / "global_step_1" / MARKER).unlink()
    failure(run("resume", one_step, "--dry-run", "--json"), "resume-checkpoints-in-the-way")
    before = tree(one_step)
    data = document(run("resume", one_step, "--dry-run", "--json", "--move-aside"),
                    "dexrl.resume-plan/1")
    assert tree(one_step) == before  # nothing moved, nothing written
    assert data["checkpoint"] is None and data["restart"] is True
    assert (data["from_step"], data["to_step"]) == (0, 3)
    assert any("global_step_1" in note for note in data["notes"])
    assert all(not c["set_by_dexrl"] or c["key"].startswith("runner.")
               for c in data["config_changes"])


def test_resume_json_failures(one_step: Path, tmp_path: Path) -> None:
    failure(run("resume", one_step, "--json"), "flags-json-needs-dry-run")
    failure(run("resume", tmp_path / "nothing", "--dry-run", "--json"), "run-not-found")
    failure(run("resume", one_step, "--dry-run", "--json", "actor.optim.lr=1e-3"),
            "resume-unsafe-changes")


# --- eval -----------------------------------------------------------------------------------


def test_eval_json_carries_results_json_and_where_it_wrote(cued_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "a"
    data = document(run("eval", "--ckpt", cued_run, "--suite", "reach_cued",
                        "--episodes-per-task", "2", "--num-envs", "2", "--out", out, "--json"),
                    "dexrl.eval/1")
    assert data["out"] == str(out) and data["results_path"] == str(out / "results.json")
    assert data["videos"] is None and data["log"] == str(out / "eval.log")
    results = data["results"]
    assert results == json.loads((out / "results.json").read_text())  # verbatim
    assert [r["task_id"] for r in results["per_task"]] == [0, 1, 2]
    assert results["overall"]["episodes"] == 6 and len(results["overall"]["ci95"]) == 2
    assert results["blind_bound"]["success_rate"] == pytest.approx(1 / 3)
    assert isinstance(data["notes"], list)


@pytest.mark.parametrize(("args", "code"), [
    (["--ckpt", "/no/such/ckpt", "--suite", "reach_cued"], "checkpoint-not-found"),
    (["--suite", "reach_cued", "--tasks", "7"], "eval-task-out-of-range"),
])
def test_eval_json_failures(cued_run: Path, tmp_path: Path, args: list[str], code: str) -> None:
    if "--ckpt" not in args:
        args = ["--ckpt", str(cued_run), *args]
    failure(run("eval", *args, "--out", tmp_path / "out", "--json"), code)
    assert not (tmp_path / "out").exists()


# --- export ---------------------------------------------------------------------------------


def test_export_json_lists_what_it_wrote(tiny_run_at: Callable[[int], Path],
                                         tmp_path: Path) -> None:
    tiny_run = tiny_run_at(3)
    out = tmp_path / "out"
    data = document(run("export", tiny_run, "--out", out, "--json"), "dexrl.export/1")
    assert data["out"] == str(out) and data["step"] == 3
    assert data["source"]["form"] == "rlinf" and data["source"]["run_dir"] == str(tiny_run)
    assert (data["tensors"], data["dtype"], data["value_head"]) == (90, "float32", False)
    assert data["files"] == sorted(str(p.relative_to(out)) for p in out.rglob("*")
                                   if p.is_file())
    assert {"model.safetensors", "config.json", "dexrl-export.json"} <= set(data["files"])
    assert data["model_card_results"] is None and data["hub"] is None


def test_export_json_failures(tiny_run_at: Callable[[int], Path], tiny_pi0_dir: Path,
                              tmp_path: Path) -> None:
    failure(run("export", tiny_pi0_dir, "--out", tmp_path / "out", "--json"),
            "export-already-dexbotic")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    failure(run("export", tiny_run_at(3), "--out", tmp_path / "full", "--json"),
            "export-out-not-empty")


# --- plot -----------------------------------------------------------------------------------


def test_plot_json_names_the_png_and_the_runs(tmp_path: Path) -> None:
    one = Path(shutil.copytree(PLOT_FIXTURE, tmp_path / "seed0"))
    two = Path(shutil.copytree(PLOT_FIXTURE, tmp_path / "seed1"))
    png = tmp_path / "both.png"
    data = document(run("plot", one, two, "--out", png, "--json"), "dexrl.plot/1")
    assert data["png"] == str(png) and png.is_file()
    assert [(r["label"], r["run_dir"]) for r in data["runs"]] == [("seed0", str(one)),
                                                                  ("seed1", str(two))]
    assert all(r["last_step"] == 2 for r in data["runs"])
    single = document(run("plot", one, "--json"), "dexrl.plot/1")
    assert single["png"] == str(one / CURVES)


def test_plot_json_of_a_parent_folder_puts_what_it_found_in_the_document(tmp_path: Path) -> None:
    parent = tmp_path / "runs"
    for name in ("seed0", "seed1"):
        shutil.copytree(PLOT_FIXTURE, parent / name)
    data = document(run("plot", parent, "--json"), "dexrl.plot/1")  # no note line on stdout
    assert [r["label"] for r in data["runs"]] == ["seed0", "seed1"]
    assert any("2 run folders" in note for note in data["notes"])
    assert Path(data["png"]).is_file()


def test_plot_json_failures(tmp_path: Path) -> None:
    failure(run("plot", tmp_path / "nothing", "--json"), "run-not-found")
    one = Path(shutil.copytree(PLOT_FIXTURE, tmp_path / "seed0"))
    failure(run("plot", one, "--out", tmp_path / "x.jpg", "--json"), "plot-out-not-png")
