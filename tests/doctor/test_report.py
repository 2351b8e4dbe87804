"""Output formats: the versioned JSON document, the Markdown block, the table, exit codes."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from dexrl import __version__
from dexrl.doctor import STATUSES, fail, ok, skip, warn
from dexrl.doctor.context import Budget, Context
from dexrl.doctor.cuda import CudaFacts, Gpu
from dexrl.doctor.report import (
    SCHEMA,
    exit_code,
    print_table,
    relevant_env,
    summary,
    to_json,
    to_markdown,
)

ROWS = [ok("stack.versions", "12 packages within dexrl's ranges", versions={"torch": "2.6"}),
        warn("stack.mujoco", "mujoco 3.3.7 | not 3.3.2", "pip install mujoco==3.3.2"),
        fail("cuda.devices", "no CUDA", "use a GPU machine"),
        skip("checkpoint.files", "no checkpoint given", "pass --ckpt")]


def context() -> Context:
    ctx = Context(Budget(120.0), config_name="libero_goal_ppo_dexbotic_pi0", suite="libero_goal",
                  quick=True)
    ctx.facts["versions"] = {"python": "3.11.7", "torch": "2.6.0", "robosuite": None}
    ctx.facts["cuda"] = CudaFacts("2.6.0", "12.4", True, (Gpu(0, "NVIDIA H100", 1, 2),),
                                  driver="550.54")
    return ctx


def test_exit_code_and_summary() -> None:
    assert exit_code(ROWS) == 1
    assert exit_code([r for r in ROWS if r.status != "fail"]) == 0  # warnings alone pass
    assert summary(ROWS) == {"ok": 1, "warn": 1, "fail": 1, "skip": 1}


def test_json_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MUJOCO_GL", "egl")
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    monkeypatch.setenv("HF_TOKEN", "secret-token")
    doc = json.loads(to_json(ROWS, context(), 12.345))
    assert doc["schema"] == SCHEMA == "dexrl.doctor/1"
    assert set(doc) == {"schema", "dexrl", "created", "options", "elapsed_s", "exit_code",
                        "summary", "environment", "checks"}
    assert doc["dexrl"] == __version__
    assert doc["elapsed_s"] == 12.35 and doc["exit_code"] == 1
    assert doc["options"] == {"suite": "libero_goal", "config": "libero_goal_ppo_dexbotic_pi0",
                              "ckpt": None, "ray_address": None, "quick": True, "budget_s": 120.0}
    env = doc["environment"]
    assert set(env) == {"python", "executable", "platform", "versions", "gpus", "driver", "cuda",
                        "env"}
    assert env["gpus"] == [{"index": 0, "name": "NVIDIA H100", "free_bytes": 1, "total_bytes": 2}]
    assert env["driver"] == "550.54" and env["cuda"] == "12.4"
    assert env["env"]["MUJOCO_GL"] == "egl" and env["env"]["NCCL_DEBUG"] == "INFO"
    assert "HF_TOKEN" not in env["env"] and "secret-token" not in json.dumps(doc)
    for check in doc["checks"]:
        assert set(check) == {"id", "status", "finding", "fix", "seconds", "details"}
        assert check["status"] in STATUSES
        assert (check["fix"] is None) == (check["status"] == "ok")
    assert doc["checks"][0]["details"] == {"versions": {"torch": "2.6"}}


def test_variables_are_the_snapshot_taken_before_ray_started(monkeypatch: pytest.MonkeyPatch,
                                                             ) -> None:
    ctx = context()
    ctx.facts["env"] = {"MUJOCO_GL": "egl"}
    monkeypatch.setenv("RAY_AUTH_MODE", "token")  # as Ray sets it in the doctor's own process
    doc = json.loads(to_json(ROWS, ctx, 1.0))
    assert doc["environment"]["env"] == {"MUJOCO_GL": "egl"}


def test_markdown_block() -> None:
    text = to_markdown(ROWS, context(), 3.0)
    assert text.startswith("### `dexrl doctor` report\n")
    assert "- GPUs: 1 × NVIDIA H100 (driver 550.54, CUDA 12.4)" in text
    assert "| torch | 2.6.0 |" in text and "| robosuite | not installed |" in text
    assert "| cuda.devices | fail | no CUDA | use a GPU machine |" in text
    assert "mujoco 3.3.7 \\| not 3.3.2" in text  # pipes escaped inside table cells
    assert "1 fail, 1 warn, 1 ok, 1 skip in 3.0 s (budget 120 s)" in text


def test_markdown_without_gpu_or_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = context()
    ctx.facts["cuda"] = CudaFacts("2.13.0+cpu", None, False)
    for key in relevant_env():
        monkeypatch.delenv(key)
    text = to_markdown(ROWS, ctx, 1.0)
    assert "- GPUs: none visible (driver not found, torch CUDA none)" in text
    assert "(none of the relevant variables is set)" in text


def test_table() -> None:
    out = io.StringIO()
    print_table(ROWS, 2.5, 300, Console(file=out, width=200))
    text = out.getvalue()
    assert "cuda.devices" in text and "use a GPU machine" in text
    assert "some checks failed: 1 fail, 1 warn, 1 ok, 1 skip in 2.5 s (budget 300 s)" in text
