"""``bench/libero_run.py``'s arithmetic: a steady step from a run's last steps, scaled to the
shipped rollout epochs (the GPU measurement it runs is in docs/performance.md; its CPU path ran
end to end as described there)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture()
def libero_run(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(BENCH))
    monkeypatch.setattr(sys, "path", list(sys.path))
    import libero_run

    return libero_run


def row(epochs: int, *, env: float, calls: float, resets: float | None, training: float,
        other: float = 1.0, write: float = 0.0) -> dict:
    rollout = env + calls + (resets or 0.0) + other
    return {"rollout_epochs": epochs, "env steps": env, "rollout calls": calls,
            "resets": resets, "training": training, "rollout phase": rollout,
            "weight sync": 0.5, "advantages": 0.1,
            "step time": rollout + training + 0.6 + write}


def test_phases_grow_along_the_line_through_two_sizes(libero_run) -> None:
    rows = [row(1, env=12, calls=4, resets=4, training=8),
            row(2, env=24, calls=8, resets=8, training=16, other=1.5)]
    est = libero_run.scaled(rows, 8, overlap=False)
    assert est["env steps"] == pytest.approx(96)
    assert est["rollout calls"] == pytest.approx(32)
    assert est["training"] == pytest.approx(64)
    assert est["resets"] == pytest.approx(32)  # 8 epochs of the 4 s measured per epoch
    assert est["other rollout"] == pytest.approx(4.5)  # 1 + 0.5 per epoch beyond the first
    assert est["step"] == pytest.approx(96 + 32 + 32 + 4.5 + 64 + 0.5 + 0.1)


def test_a_last_step_with_the_overlap_counted_one_epoch_of_resets_fewer(libero_run) -> None:
    """Its first epoch's resets ran during the step before; a steady step waits for them only
    where they outlast training."""
    rows = [row(1, env=12, calls=4, resets=None, training=2),
            row(2, env=24, calls=8, resets=5, training=4)]
    assert libero_run.per_epoch_reset(rows, overlap=True) == 5
    est = libero_run.scaled(rows, 8, overlap=True)
    assert est["resets"] == pytest.approx(7 * 5)
    assert est["training"] == pytest.approx(16)
    assert est["hidden reset excess"] == 0.0  # 5 s of resets during 16 s of training
    short = libero_run.scaled(rows[:1], 1, overlap=True, reset_s=5.0)
    assert short["resets"] == 0 and short["hidden reset excess"] == pytest.approx(3.0)


def test_one_size_scales_in_proportion_and_the_checkpoint_write_is_left_out(libero_run) -> None:
    last = row(1, env=12, calls=4, resets=4, training=8, write=20.0)
    est = libero_run.scaled([last], 8, overlap=False)
    assert est["env steps"] == pytest.approx(96) and est["resets"] == pytest.approx(32)
    assert est["step"] == pytest.approx(96 + 32 + 32 + 8 + 64 + 0.6)
    assert libero_run.scaled([last], 1, overlap=False)["step"] == pytest.approx(
        last["step time"] - 20.0)
