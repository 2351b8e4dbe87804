"""Automatic restarts (--max-restarts): which failures restart, the backoff, the record in
run-state.json and the log, the child's command; the child itself is faked here (the real
restart of a run whose worker was killed: tests/scenarios/test_run_restarts_real.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dexrl.bridge.launch.spec import LaunchOptions
from dexrl.checkpoints.files.steps import mark_complete
from dexrl.errors import DexrlError
from dexrl.runs.layout import LOG_FILE
from dexrl.runs.state import STATE_FILE, begin, read
from dexrl.training import restarts
from dexrl.training.restarts import backoff_s, resume_command, run_restarting


@pytest.fixture
def run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(restarts.BACKOFF_ENV, "0")
    step = tmp_path / "checkpoints" / "global_step_2"
    (step / "actor").mkdir(parents=True)
    (step / "actor" / "weights").write_text("w")
    mark_complete(step, 2)
    (tmp_path / "logs").mkdir()
    begin(tmp_path, 2).end("failed", "training-worker-died")
    return tmp_path


def _died() -> int:
    raise DexrlError("the env worker EnvGroup:0 died during step 3", "resume",
                     code="training-worker-died")


def _children(monkeypatch: pytest.MonkeyPatch, run_dir: Path,
              outcomes: list[tuple[int, str | None]]) -> list[list[str]]:
    """Fake ``dexrl resume`` children: each ends with (exit status, the error it records)."""
    started: list[list[str]] = []

    def child(command: list[str]) -> int:
        started.append(command)
        status, error = outcomes[len(started) - 1]
        record = read(run_dir)
        record.update(status="finished" if status == 0 else "failed", error=error)
        (run_dir / STATE_FILE).write_text(json.dumps(record))
        return status

    monkeypatch.setattr(restarts, "_child", child)
    return started


def test_backoff_doubles_from_its_first_wait_up_to_a_cap() -> None:
    assert [backoff_s(n, 30.0) for n in (1, 2, 3)] == [30.0, 60.0, 120.0]
    assert backoff_s(20, 30.0) == restarts.MAX_BACKOFF_S


def test_the_child_is_dexrl_resume_with_the_launch_flags(tmp_path: Path) -> None:
    options = LaunchOptions(ray_address="10.0.0.1:6379", verbose=True, stall_timeout=900,
                            max_restarts=3)
    command = resume_command(tmp_path, options)
    assert command[1:5] == ["-m", "dexrl", "resume", str(tmp_path)]
    assert command[5:] == ["--stall-timeout", "900", "--max-restarts", "0", "--verbose",
                           "--ray-address", "10.0.0.1:6379"]


def test_a_transient_failure_restarts_from_the_last_checkpoint_and_is_recorded(
        run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    said: list[str] = []
    started = _children(monkeypatch, run_dir, [(0, None)])
    code = run_restarting(run_dir, LaunchOptions(max_restarts=2), _died, said.append)
    assert code == 0 and len(started) == 1
    assert said[0].startswith("error: the env worker EnvGroup:0 died") and "[training-" in said[0]
    assert said[1] == (f"Restart 1 of 2 in 0 s after [training-worker-died]: `dexrl resume "
                       f"{run_dir}` continues from global_step_2.")
    [restart] = read(run_dir)["restarts"]
    assert restart["attempt"] == 1 and restart["after"] == "training-worker-died"
    assert restart["from_step"] == 2 and restart["of"] == 2
    assert "Restart 1 of 2" in (run_dir / LOG_FILE).read_text()


def test_restarts_stop_at_the_limit_and_at_a_deterministic_failure(
        run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    said: list[str] = []
    started = _children(monkeypatch, run_dir, [(2, "training-worker-died")] * 3)
    assert run_restarting(run_dir, LaunchOptions(max_restarts=2), _died, said.append) == 2
    assert len(started) == 2 and len(read(run_dir)["restarts"]) == 2
    assert "gave up after 2 restart(s)" in said[-1]
    again = _children(monkeypatch, run_dir, [(2, "training-diverged"), (0, None)])
    assert run_restarting(run_dir, LaunchOptions(max_restarts=3), _died, said.append) == 2
    assert len(again) == 1  # a diverged restart is not restarted again


@pytest.mark.parametrize("code", ["training-diverged", "disk-full", "training-out-of-memory",
                                  "training-worker-failed", "config-invalid"])
def test_a_deterministic_failure_is_never_restarted(run_dir: Path, code: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    started = _children(monkeypatch, run_dir, [(0, None)])

    def fails() -> int:
        raise DexrlError("no", "fix", code=code)

    with pytest.raises(DexrlError) as err:
        run_restarting(run_dir, LaunchOptions(max_restarts=5), fails, lambda text: None)
    assert err.value.code == code and started == [] and "restarts" not in read(run_dir)


def test_without_max_restarts_a_dead_worker_ends_the_command(
        run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started = _children(monkeypatch, run_dir, [(0, None)])
    with pytest.raises(DexrlError, match="died"):
        run_restarting(run_dir, LaunchOptions(), _died, lambda text: None)
    assert started == []
