"""`dexrl eval` through the real CLI: bad input, then real LIBERO episodes with tiny checkpoints.

The LIBERO tests run RLinf's env wrapper in subprocesses (one env, task 0, 10 steps).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest
from helpers import cli
from typer.testing import CliRunner

from dexrl.cli import app
from dexrl.hub.libero_assets import is_asset_tree, libero_assets_dir

runner = CliRunner()
SMALL = ["--suite", "libero_spatial", "--tasks", "0", "--episodes-per-task", "2", "--num-envs",
         "1", "--max-episode-steps", "10"]


def libero_ready() -> bool:
    try:
        return is_asset_tree(libero_assets_dir())
    except Exception:
        return False


needs_libero = pytest.mark.skipif(not libero_ready(), reason="LIBERO scene assets are not "
                                  "installed (`make install` links them)")


run = partial(cli.run, "eval", columns=200)


@pytest.mark.parametrize(
    ("args", "code"),
    [(["--suite", "libero_100"], "unknown-suite"),
     (["--suite", "libero_spatial", "--tasks", "3-11"], "eval-task-out-of-range"),
     (["--suite", "libero_goal"], "eval-suite-mismatch"),
     (["--suite", "libero_spatial", "--episodes-per-task", "51"], "eval-too-many-episodes"),
     (["--suite", "libero_spatial", "--action-chunk", "9"], "eval-value-out-of-range"),
     (["--suite", "libero_spatial", "--video", "best"], "eval-video-mode-unknown"),
     (["--suite", "libero_spatial", "seed=4"], "eval-env-override-owned"),
     (["--suite", "libero_spatial", "--compare", "/no/results.json"], "results-not-found")],
)
def test_bad_input_is_one_error_and_writes_nothing(tiny_run: Path, tmp_path: Path,
                                                   args: list[str], code: str) -> None:
    result = run("--ckpt", tiny_run, "--out", tmp_path / "out", *args)
    assert result.exit_code == 2, result.output
    assert f"[{code}]" in result.output
    assert result.output.count("error:") == 1 and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_missing_base_checkpoint(tiny_run: Path, tmp_path: Path) -> None:
    from omegaconf import OmegaConf

    run_dir = Path(shutil.copytree(tiny_run, tmp_path / "run"))
    cfg = OmegaConf.load(run_dir / "config.yaml")
    cfg.actor.model.model_path = "/gone/base"
    OmegaConf.save(cfg, run_dir / "config.yaml")
    result = run("--ckpt", run_dir, *SMALL)
    assert result.exit_code == 2, result.output
    assert "[base-not-on-machine]" in result.output and "--base" in result.output
    assert not (run_dir / "eval").exists()


def test_missing_libero_assets(tiny_run: Path, tmp_path: Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    import dexrl.hub.libero_assets

    monkeypatch.setattr(dexrl.hub.libero_assets, "libero_assets_dir", lambda: tmp_path / "assets")
    result = run("--ckpt", tiny_run, "--out", tmp_path / "out", *SMALL)
    assert result.exit_code == 2 and "[libero-assets-missing]" in result.output
    assert not (tmp_path / "out").exists()


def test_missing_checkpoint_path(tmp_path: Path) -> None:
    result = run("--ckpt", tmp_path / "nothing", *SMALL)
    assert result.exit_code == 2 and "[checkpoint-not-found]" in result.output


@pytest.mark.spawns
@needs_libero
def test_a_stale_libero_config_is_named(tiny_run: Path, tmp_path: Path) -> None:
    stale = tmp_path / "libero-config"
    stale.mkdir()
    (stale / "config.yaml").write_text("".join(
        f"{key}: /gone/libero/{key}\n" for key in ("benchmark_root", "bddl_files", "init_states",
                                                  "datasets", "assets")))
    done = subprocess.run([str(Path(sys.executable).with_name("dexrl")), "eval", "--ckpt",
                           str(tiny_run), "--out", str(tmp_path / "out"), *SMALL],
                          env={**os.environ, "LIBERO_CONFIG_PATH": str(stale)},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    assert (f"error: {stale / 'config.yaml'}: LIBERO's config points bddl_files at "
            "/gone/libero/bddl_files, which does not exist") in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "out").exists()


def test_refuses_an_output_folder_with_another_evaluation(tiny_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").write_text("{}")
    result = run("--ckpt", tiny_run, "--out", out, *SMALL)
    assert result.exit_code == 2 and "[eval-out-not-empty]" in result.output
    assert (out / "results.json").read_text() == "{}"


@pytest.fixture(scope="module")
def first_eval(tiny_run: Path, tmp_path_factory: pytest.TempPathFactory
               ) -> tuple[Path, str, str, Path]:
    """One real evaluation of the training checkpoint, videos of every episode.

    Run as a user would: ``dexrl eval`` in a subprocess, stdout and stderr piped, from another
    directory, on a copy of the run folder moved elsewhere. Returns (output folder, stdout,
    stderr, the moved run folder).
    """
    root = tmp_path_factory.mktemp("eval")
    (root / "mounted").mkdir()
    moved = Path(shutil.move(shutil.copytree(tiny_run, root / "copy"), root / "mounted" / "run"))
    (root / "cwd").mkdir()
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    done = subprocess.run([str(Path(sys.executable).with_name("dexrl")), "eval", "--ckpt",
                           str(moved), "--out", "a", "--video", "all", *SMALL],
                          cwd=root / "cwd", env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return root / "cwd" / "a", done.stdout, done.stderr, moved


def episodes_of(out: Path) -> list[tuple]:
    data = json.loads((out / "results.json").read_text())
    return [(e["task_id"], e["trial_id"], e["success"], e["length"], e["actions_sha256"])
            for e in data["episodes"]]


@pytest.mark.spawns
@needs_libero
def test_eval_on_libero(first_eval: tuple[Path, str, str, Path], tiny_run: Path,
                        tiny_pi0_dir: Path) -> None:
    out, output, errors, moved = first_eval
    assert "Config, tokenizer, image preprocessing, norm stats: base checkpoint" in output
    assert f"(from {moved}/config.yaml)" in output
    assert f"note: the run folder was at {tiny_run}" in output
    # Piped: the table is not cut to 80 columns.
    assert "pick up the black bowl between the plate and the ramekin" in output  # task 0
    # Quiet: robosuite's, gym's and Python's warnings went to the log, not the terminal.
    for noise in ("No private macro file found", "Gym has been unmaintained", "Warning",
                  "[info] using task orders"):
        assert noise not in output + errors, noise
    assert "No private macro file found" in (out / "eval.log").read_text()
    assert "Third-party output (robosuite, gym, warnings): a/eval.log" in output
    assert "0.0 % [0.0, 65.8]" in output or "100.0 % [34.2, 100.0]" in output
    data = json.loads((out / "results.json").read_text())
    assert data["schema"] == "dexrl-eval-results" and data["schema_version"] == 1
    assert data["checkpoint"]["form"] == "rlinf" and data["checkpoint"]["step"] == 2
    assert data["checkpoint"]["model_dir"] == str(tiny_pi0_dir.resolve())
    config = data["config"]
    assert (config["action_chunk"], config["num_steps"], config["max_episode_steps"]) == (5, 4,
                                                                                          10)
    assert config["sources"]["action_chunk"].startswith("training config")
    assert config["dtype"] == "float32" and config["device"] in ("cpu", "cuda")
    assert [(t, k) for t, k, *_ in episodes_of(out)] == [(0, 0), (0, 1)]
    assert all(1 <= length <= 10 for *_, length, _ in episodes_of(out))
    assert data["overall"]["episodes"] == 2 and data["reference"] is None
    assert data["timing"]["policy_calls"] >= 2 and data["versions"]["rlinf"] == "0.3.0"
    lines = (out / "progress.jsonl").read_text().splitlines()
    assert len(lines) == 3 and "header" in json.loads(lines[0])
    videos = sorted(p.name for p in (out / "videos").iterdir())
    assert videos[0] == "index.html" and len(videos) == 3
    assert videos[1].startswith("task00_trial00_") and videos[2].startswith("task00_trial01_")
    assert not list(out.glob(".*"))  # no temporary files left


@pytest.mark.slow
@needs_libero
def test_export_round_trip_gives_identical_actions(first_eval: tuple, tiny_run: Path,
                                                   tmp_path: Path) -> None:
    exported = runner.invoke(app, ["export", str(tiny_run), "--out", str(tmp_path / "exp")])
    assert exported.exit_code == 0, exported.output
    out_a = first_eval[0]
    # An exported checkpoint is a Dexbotic folder (standard by default): under the training
    # protocol, as its run was evaluated, it plays the same episodes.
    refused = run("--ckpt", tmp_path / "exp", "--out", tmp_path / "b", "--compare",
                  out_a / "results.json", *SMALL)
    assert refused.exit_code == 2 and "[compare-protocol-mismatch]" in refused.output
    result = run("--ckpt", tmp_path / "exp", "--out", tmp_path / "b", "--compare",
                 out_a / "results.json", "--protocol", "training", *SMALL)
    assert result.exit_code == 0, result.output
    assert episodes_of(tmp_path / "b") == episodes_of(out_a)  # same outcomes, same actions
    comparison = json.loads((tmp_path / "b" / "results.json").read_text())["comparison"]
    assert comparison["pairs"] == 2 and comparison["overall"]["delta"] == 0
    assert comparison["overall"]["mcnemar"]["p_value"] == 1.0
    assert comparison["config_differences"] == {"video": ["none", "all"]}
    assert "exact McNemar: 0 pairs only this run solved" in result.output


@needs_libero
@pytest.mark.slow
def test_same_arguments_same_episodes_with_parallel_envs(tiny_run: Path, tmp_path: Path) -> None:
    args = ["--ckpt", tiny_run, "--suite", "libero_spatial", "--tasks", "0-1",
            "--episodes-per-task", "2", "--num-envs", "2", "--max-episode-steps", "15"]
    first = run(*args, "--out", tmp_path / "a")
    second = run(*args, "--out", tmp_path / "b")
    assert first.exit_code == 0 and second.exit_code == 0, first.output + second.output
    assert episodes_of(tmp_path / "a") == episodes_of(tmp_path / "b")
    assert [k[:2] for k in episodes_of(tmp_path / "a")] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    again = run(*args, "--out", tmp_path / "a", "--seed", "1", "--overwrite")
    assert again.exit_code == 0, again.output
    hashes = {e[-1] for e in episodes_of(tmp_path / "a")}
    assert hashes.isdisjoint(e[-1] for e in episodes_of(tmp_path / "b"))  # the seed matters


@needs_libero
@pytest.mark.slow
@pytest.mark.parametrize("form", ["checkpoints/global_step_2",
                                  "checkpoints/global_step_2/actor/model_state_dict/"
                                  "full_weights.pt"])
def test_every_rlinf_form_evaluates_the_same(first_eval: tuple, tiny_run: Path,
                                             tmp_path: Path, form: str) -> None:
    result = run("--ckpt", tiny_run / form, "--out", tmp_path / "c", *SMALL)
    assert result.exit_code == 0, result.output
    assert episodes_of(tmp_path / "c") == episodes_of(first_eval[0])


@needs_libero
@pytest.mark.slow
def test_the_end_of_a_libero_10_queue_does_not_crash(tiny_pi0_dir: Path, tmp_path: Path) -> None:
    # Two envs, three 520-step episodes: env 1 has nothing left while env 0 runs the third. It
    # used to be stepped with zero actions past robosuite's 1000-step horizon and the evaluation
    # ended in `Aborted!` without results.json (issue 45).
    result = run("--ckpt", tiny_pi0_dir, "--out", tmp_path / "out", "--suite", "libero_10",
                 "--tasks", "0", "--episodes-per-task", "3", "--num-envs", "2",
                 "--protocol", "training")
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    assert data["complete"] and data["overall"]["episodes"] == 3
    assert sorted(e["env_slot"] for e in data["episodes"]) == [0, 0, 1]
