"""results.json schema, atomic writes, the progress file, the output guard and --compare."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.eval_progress import read_progress

from dexrl.errors import DexrlError
from dexrl.evaluation import results as res
from dexrl.evaluation.episode_loop import EpisodeResult
from dexrl.runs import durable

LANGUAGES = {0: "open the drawer", 3: "pick up the bowl"}


def episode(task: int, trial: int, success: bool, length: int = 100) -> EpisodeResult:
    return EpisodeResult(task, trial, 1000 * task + trial, 7, success, length, f"h{task}-{trial}",
                         0)


def make(outcomes: dict[tuple[int, int], bool], suite: str = "libero_spatial",
         **config: object) -> dict:
    episodes = [episode(t, k, ok) for (t, k), ok in sorted(outcomes.items())]
    return res.build_results(
        suite=suite, checkpoint={"path": "/ckpt"}, config={"seed": 0, **config}, seed=0,
        episodes=episodes, languages=LANGUAGES, wall_time_s=1.5,
        environment={"versions": {"dexrl": "x"}, "git": None, "command": ["dexrl", "eval"]})


def test_summary_counts_rates_intervals_and_lengths() -> None:
    eps = [episode(0, 0, True, 50), episode(0, 1, False, 300), episode(3, 0, True, 80)]
    per_task, overall = res.summarize(eps, LANGUAGES)
    assert [(t["task_id"], t["successes"], t["episodes"]) for t in per_task] == [(0, 1, 2),
                                                                                  (3, 1, 1)]
    assert per_task[0]["language"] == "open the drawer"
    assert per_task[0]["mean_length"] == 175.0
    assert overall["success_rate"] == pytest.approx(2 / 3)
    low, high = overall["ci95"]
    assert 0 < low < 2 / 3 < high < 1


def test_results_schema(tmp_path: Path) -> None:
    data = make({(0, 0): True, (0, 1): False}, num_steps=4)
    path = durable.write_json(tmp_path / res.RESULTS_FILE, data)
    loaded = res.load_results(path)
    assert loaded["schema"] == "dexrl-eval-results" and loaded["schema_version"] == 1
    for key in ("created", "wall_time_s", "suite", "success_metric", "checkpoint", "config",
                "seeds", "versions", "git", "command", "per_task", "overall", "episodes",
                "reference", "comparison", "complete", "partial", "protocol"):
        assert key in loaded, key
    assert loaded["complete"] is True and loaded["partial"] is None
    assert set(loaded["episodes"][0]) == {"task_id", "trial_id", "noise_seed", "scene_seed",
                                          "success", "length", "actions_sha256", "env_slot",
                                          "video"}
    assert loaded["seeds"]["seed"] == 0
    assert res.load_results(tmp_path) == loaded  # a folder means its results.json


def test_progress_log_survives_a_torn_line(tmp_path: Path) -> None:
    log = res.ProgressLog(tmp_path / res.PROGRESS_FILE, {"suite": "libero_goal"})
    log.episode(episode(0, 0, True))
    log.episode(episode(0, 1, False))
    # readable while the run is still going (flushed per episode)
    assert len(read_progress(tmp_path / res.PROGRESS_FILE)[1]) == 2
    log.close()
    with open(tmp_path / res.PROGRESS_FILE, "a") as handle:
        handle.write('{"episode": {"task_id": 0, "tri')  # the run was killed mid-write
    header, episodes = read_progress(tmp_path / res.PROGRESS_FILE)
    assert header == {"suite": "libero_goal"}
    assert [(e["trial_id"], e["success"]) for e in episodes] == [(0, True), (1, False)]


def test_out_dir_guard(tmp_path: Path) -> None:
    assert res.check_out_dir(tmp_path / "new", overwrite=False) == []
    (tmp_path / "notes.txt").write_text("mine")
    assert res.check_out_dir(tmp_path, overwrite=False) == []  # unrelated files are fine
    (tmp_path / "progress.jsonl").write_text("{}")
    (tmp_path / "videos").mkdir()
    with pytest.raises(DexrlError) as err:
        res.check_out_dir(tmp_path, overwrite=False)
    assert err.value.code == "eval-out-not-empty"
    assert "--overwrite" in err.value.hint
    stale = res.check_out_dir(tmp_path, overwrite=True)
    res.claim_out_dir(tmp_path, stale)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(DexrlError) as err:
        res.check_out_dir(tmp_path / "file", overwrite=True)
    assert err.value.code == "eval-out-is-a-file"


@pytest.mark.parametrize(
    ("content", "code"),
    [(None, "results-not-found"), ("{", "results-unreadable"),
     ('{"schema": "other"}', "results-wrong-schema"),
     ('{"schema": "dexrl-eval-results", "schema_version": 99}', "results-schema-too-new"),
     ('{"schema": "dexrl-eval-results", "schema_version": 1, "suite": "x"}', "results-incomplete")],
)
def test_load_results_rejects(tmp_path: Path, content: str | None, code: str) -> None:
    path = tmp_path / "results.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(DexrlError) as err:
        res.load_results(path)
    assert err.value.code == code


def test_compare_pairs_shared_episodes_with_mcnemar() -> None:
    mine = make({(0, k): k < 8 for k in range(10)} | {(3, 0): True, (3, 1): True},
                max_episode_steps=220)
    # other: task 0 solved on 2..9 (discordant on 0, 1 and 8, 9), task 3 trial 1 missing,
    # and one episode the first run did not play
    other = make({(0, k): k >= 2 for k in range(10)} | {(3, 0): False, (3, 5): True},
                 max_episode_steps=300)
    out = res.compare(mine, other, "other/results.json")
    assert out["pairs"] == 11 and out["only_here"] == 1 and out["only_other"] == 1
    task0, task3 = out["per_task"]
    assert (task0["successes"], task0["other_successes"], task0["delta"]) == (8, 8, 0.0)
    assert (task3["pairs"], task3["successes"], task3["other_successes"]) == (1, 1, 0)
    test = out["overall"]["mcnemar"]
    assert (test["only_this_succeeded"], test["only_other_succeeded"]) == (3, 2)
    assert test["p_value"] == pytest.approx(1.0)
    assert out["overall"]["delta"] == pytest.approx(1 / 11)
    assert out["config_differences"] == {"max_episode_steps": [220, 300]}
    # Neither records a protocol (older files): both read as training, with their horizons.
    assert out["protocol_differences"] == {"max_episode_steps": [220, 300]}


def test_compare_refuses_other_suites_and_disjoint_runs() -> None:
    mine = make({(0, 0): True})
    with pytest.raises(DexrlError, match="libero_goal") as err:
        res.compare(mine, make({(0, 0): True}, suite="libero_goal"), "o.json")
    assert err.value.code == "compare-suite-mismatch"
    with pytest.raises(DexrlError) as err:
        res.compare(mine, make({(3, 0): True}), "o.json")
    assert err.value.code == "compare-no-shared-episodes"
