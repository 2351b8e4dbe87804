"""`dexrl eval` on dexrl's built-in tasks through the real CLI: a per-target table with Wilson
intervals and the blind bound, repeatable episodes, masks as env overrides, and bad task settings
as one error line that writes nothing."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pytest
from helpers import cli

SMALL = ["--suite", "reach_cued", "--episodes-per-task", "4", "--num-envs", "4"]


run = partial(cli.run, "eval", columns=200)


def test_per_target_table_json_and_blind_bound(cued_run: Path, tmp_path: Path) -> None:
    result = run("--ckpt", cued_run, *SMALL, "--out", tmp_path / "a")
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "a" / "results.json").read_text())
    assert data["suite"] == "reach_cued" and len(data["episodes"]) == 12
    assert [r["language"] for r in data["per_task"]] == [
        f"reach the {c} target" for c in ("red", "green", "blue")]
    assert all(r["episodes"] == 4 and len(r["ci95"]) == 2 for r in data["per_task"])
    bound = data["blind_bound"]
    assert bound["success_rate"] == pytest.approx(1 / 3)
    assert bound["above"] == (data["overall"]["ci95"][0] > 1 / 3)
    assert "Blind bound: 33.3 %" in result.output and "red target" in result.output
    assert "Protocol: training (the checkpoint's own settings" in result.output
    assert data["protocol"]["name"] == "training" and data["complete"] is True
    again = run("--ckpt", cued_run, *SMALL, "--out", tmp_path / "b")
    assert again.exit_code == 0, again.output
    replay = json.loads((tmp_path / "b" / "results.json").read_text())
    assert [e["actions_sha256"] for e in replay["episodes"]] == [
        e["actions_sha256"] for e in data["episodes"]]


def test_compiled_policy_calls_play_the_same_episodes(cued_run: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """``--torch-compile``: the policy calls go through the rollout's compiled path (traced by
    dynamo with its eager backend here, for time: AOTAutograd is test_fast_eval.py's, inductor's
    code generation the slow test's), compiled before the first episode, and play the eager
    evaluation's episodes."""
    from dexrl.bridge.policies import fast_eval

    monkeypatch.setattr(fast_eval, "COMPILE_BACKEND", "eager")
    small = [*SMALL[:-1], "2"]  # two envs: batch sizes 1 and 2 to compile
    one, two, output = _eager_then_compiled(cued_run, tmp_path, small)
    assert (two["config"]["torch_compile"], two["config"]["cuda_graph"]) == ("default", False)
    assert two["config"]["sources"]["torch_compile"] == "command line"
    assert one["config"]["torch_compile"] is None
    assert two["timing"]["warm_up_s"] > 0 == one["timing"]["warm_up_s"]
    assert "torch_compile" in output and "command line" in output


@pytest.mark.slow
@pytest.mark.spawns  # inductor probes the CPU's instruction set in a child interpreter
def test_inductor_compiled_evaluation_plays_the_same_episodes(
        cued_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The generated code (what ``--torch-compile default`` runs) plays the eager episodes."""
    import torch._inductor.config as inductor

    monkeypatch.setattr(inductor, "compile_threads", 1)  # no compile worker processes
    _eager_then_compiled(cued_run, tmp_path, SMALL)


def _eager_then_compiled(cued_run: Path, tmp_path: Path,
                         args: list[str]) -> tuple[dict, dict, str]:
    """The same evaluation eager, then with ``--torch-compile default``; checks that both
    played the same episodes (successes and lengths); returns both results.json and the
    compiled run's output."""
    eager = run("--ckpt", cued_run, *args, "--out", tmp_path / "eager")
    fast = run("--ckpt", cued_run, *args, "--out", tmp_path / "fast", "--torch-compile",
               "default")
    assert eager.exit_code == 0 and fast.exit_code == 0, fast.output
    one, two = (json.loads((tmp_path / d / "results.json").read_text()) for d in ("eager", "fast"))
    assert [(e["success"], e["length"]) for e in two["episodes"]] == [
        (e["success"], e["length"]) for e in one["episodes"]]
    return one, two, fast.output


def test_masks_are_env_overrides_that_change_what_the_policy_sees(cued_run: Path,
                                                                  tmp_path: Path) -> None:
    base = run("--ckpt", cued_run, *SMALL, "--out", tmp_path / "base")
    masked = run("--ckpt", cued_run, *SMALL, "--out", tmp_path / "masked",
                 "reach_cued.show_cue=false",
                 "reach_cued.fixed_instruction=move the gripper to the target")
    assert base.exit_code == 0 and masked.exit_code == 0, masked.output
    one, two = (json.loads((tmp_path / d / "results.json").read_text())
                for d in ("base", "masked"))
    assert two["config"]["env_overrides"][0] == "reach_cued.show_cue=false"
    assert {r["language"] for r in two["per_task"]} == {"move the gripper to the target"}
    assert [e["actions_sha256"] for e in one["episodes"]] != [
        e["actions_sha256"] for e in two["episodes"]]


@pytest.mark.parametrize(("args", "code"), [
    (["--suite", "reach_cue"], "unknown-suite"),
    (["--suite", "reach_cued", "reach_cued.colors=[red,green]"], "eval-task-invalid"),
    (["--suite", "reach_cued", "reach_cued.targets=[[0.5,0,0]]"], "eval-task-invalid"),
    (["--suite", "reach_cued", "init_params.camera_heights=8"], "eval-task-invalid"),
    (["--suite", "reach_cued", "reach_cued.colours=[red]"], "eval-env-override-invalid"),
    (["--suite", "reach_cued", "--tasks", "3"], "eval-task-out-of-range"),
    (["--suite", "reach"], "eval-suite-mismatch"),
    (["--suite", "reach_cued", "--cuda-graph", "--device", "cpu"], "eval-cuda-graph-no-gpu"),
    (["--suite", "reach_cued", "--torch-compile", "fastest"], "eval-compile-mode-unknown"),
])
def test_bad_task_input_is_one_error_and_writes_nothing(cued_run: Path, tmp_path: Path,
                                                        args: list[str], code: str) -> None:
    result = run("--ckpt", cued_run, "--out", tmp_path / "out", *args)
    assert result.exit_code == 2, result.output
    assert f"[{code}]" in result.output, result.output
    assert result.output.count("error:") == 1 and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_an_env_failure_is_one_error_and_keeps_what_finished(
        cued_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dexrl.bridge.envs import tasks
    from dexrl.errors import DexrlError

    step_chunk, calls = tasks.TaskVecEnv.step_chunk, []

    def dies(self, actions, busy):  # noqa: ANN001, ANN202 - an env subprocess dies mid-queue
        calls.append(1)
        if len(calls) > 2:
            raise DexrlError("a LIBERO env failed while stepping env 1 (EOFError)",
                             "see eval.log", code="eval-env-failed")
        return step_chunk(self, actions, busy)

    monkeypatch.setattr(tasks.TaskVecEnv, "step_chunk", dies)
    out = tmp_path / "out"
    result = run("--ckpt", cued_run, "--suite", "reach_cued", "--episodes-per-task", "2",
                 "--num-envs", "2", "--out", out)
    assert result.exit_code == 2, result.output
    assert result.output.count("error:") == 1 and "[eval-env-failed]" in result.output
    assert "Traceback" not in result.output and "Aborted" not in result.output
    assert f"the results.json in {out} holds the episodes that finished" in result.output
    data = json.loads((out / "results.json").read_text())
    finished = len(data["episodes"])
    assert data["complete"] is False and 0 < finished < 6
    assert data["partial"] == {"reason": "a LIBERO env failed while stepping env 1 (EOFError)",
                               "episodes_planned": 6, "episodes_finished": finished}
    assert data["overall"]["episodes"] == finished and data["reference"] is None
    progress = (out / "progress.jsonl").read_text().splitlines()
    assert len(progress) == 1 + finished  # the header, then each finished episode


def test_default_folders_are_named_by_the_overrides(cued_run: Path, tmp_path: Path) -> None:
    """docs/cli.md's masking sequence without --out: each evaluation gets its own folder, named
    by its overrides, and the same command again is refused, not written over."""
    import shutil

    from dexrl.evaluation.session import overrides_tag

    run_dir = Path(shutil.copytree(cued_run, tmp_path / "run"))
    masks = [(), ("reach_cued.show_cue=false",),
             ("reach_cued.fixed_instruction=reach the target",)]
    for mask in masks:
        result = run("--ckpt", run_dir, *SMALL, *mask)
        assert result.exit_code == 0, result.output
    names = sorted(p.name for p in (run_dir / "eval").iterdir())
    assert names == sorted([
        "global_step_2-reach_cued",
        "global_step_2-reach_cued-reach_cued.show_cue=false",
        "global_step_2-reach_cued-reach_cued.fixed_instruction=reach_the_target-"
        + overrides_tag(masks[2])[-8:]])
    masked = json.loads((run_dir / "eval" / names[-1] / "results.json").read_text())
    assert masked["config"]["env_overrides"] == ["reach_cued.show_cue=false"]
    again = run("--ckpt", run_dir, *SMALL, *masks[1])
    assert again.exit_code == 2 and "[eval-out-not-empty]" in again.output


def test_overrides_tag_is_short_safe_and_tells_overrides_apart() -> None:
    from dexrl.evaluation.session import MAX_TAG, overrides_tag

    assert overrides_tag(()) == ""
    assert overrides_tag(["a.b=1", "c=x"]) == "-a.b=1,c=x"
    spaced, joined = overrides_tag(["k=a b"]), overrides_tag(["k=a_b"])
    assert spaced.startswith("-k=a_b-") and joined == "-k=a_b" and spaced != joined
    assert overrides_tag(["k=a/b"]) != overrides_tag(["k=a:b"])  # both sanitize to k=a_b
    long = ["reach_cued.fixed_instruction=" + "x" * 100]
    assert len(overrides_tag(long)) <= MAX_TAG + 1 and overrides_tag(long) == overrides_tag(long)
    assert "/" not in overrides_tag(["x=../../etc"])
