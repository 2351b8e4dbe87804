"""``bench/gpu_bench.py``, the one GPU command, on its CPU path: the tiny checkpoints run, and
what needs CUDA is said to be skipped."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU path; a GPU runs the real one")
def test_cpu_path_fills_rows_and_names_what_it_skips(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    monkeypatch.setattr(sys, "path", list(sys.path))
    import gpu_bench

    out = tmp_path / "rows.json"
    gpu_bench.main(["--models", "pi0", "--batches", "1", "--repeats", "1",
                    "--compile-backend", "aot_eager", "--json", str(out)])
    document = json.loads(out.read_text())
    assert document["schema"] == "dexrl.gpu-bench/1"
    cases = {(row["case"], row["batch"]) for row in document["rows"]}
    assert {("rollout eager", 1), ("rollout compiled", 1),
            ("train micro-batch, recompute", 32),
            ("train micro-batch, prefix cache", 32)} <= cases
    compiled = next(r for r in document["rows"] if r["case"] == "rollout compiled")
    assert compiled["max_diff_actions"] < 1e-5
    assert compiled["compile_counters"]["graph_breaks"] == 0
    skipped = "\n".join(document["skipped"])
    assert "no CUDA" in skipped and "graphed" in skipped
    printed = capsys.readouterr().out
    assert "| pi0 | rollout compiled | 1 |" in printed and "skipped: pi0 graphed" in printed
