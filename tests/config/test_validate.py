"""The rollout compile and CUDA-graph keys: typed, explained, refused where they cannot work."""

from __future__ import annotations

from dexrl.config.validate import compose_and_check
from dexrl.training.plan import rollout_speed


def _findings(*overrides: str, cpu_only: bool = False) -> dict[str, tuple[str, str]]:
    result = compose_and_check("libero_spatial", "pi0", None, list(overrides), 8,
                               cpu_only=cpu_only)
    return {f.where: (f.level, f.code) for f in result.findings
            if f.where.startswith("rollout.")}


def test_shipped_configs_keep_both_off() -> None:
    cfg = compose_and_check("libero_spatial", "dm0", None, []).cfg
    assert cfg.rollout.enable_torch_compile is False and cfg.rollout.enable_cuda_graph is False
    assert cfg.rollout.torch_compile_mode == "max-autotune-no-cudagraphs"
    assert rollout_speed(cfg).startswith("eager")
    assert _findings() == {}


def test_a_cuda_graph_without_a_gpu_is_refused() -> None:
    found = _findings("rollout.enable_cuda_graph=true", cpu_only=True)
    assert found["rollout.enable_cuda_graph"] == ("error", "policy-cuda-graph-no-gpu")
    assert _findings("rollout.enable_cuda_graph=true") == {}
    assert _findings("rollout.enable_torch_compile=true", cpu_only=True) == {}


def test_compile_modes_that_graph_themselves_are_refused_with_graphs() -> None:
    found = _findings("rollout.enable_cuda_graph=true", "rollout.enable_torch_compile=true",
                      "rollout.torch_compile_mode=reduce-overhead")
    assert found["rollout.torch_compile_mode"] == ("error", "policy-compile-mode-graphs")
    assert _findings("rollout.enable_torch_compile=true",
                     "rollout.torch_compile_mode=reduce-overhead") == {}


def test_unknown_mode_and_types() -> None:
    assert _findings("rollout.torch_compile_mode=fastest")["rollout.torch_compile_mode"] == (
        "error", "config-value-not-a-choice")
    assert _findings("rollout.enable_cuda_graph=1")["rollout.enable_cuda_graph"] == (
        "error", "config-value-wrong-type")


def test_offload_recaptures_every_step_warning_and_plan_line() -> None:
    found = _findings("rollout.enable_cuda_graph=true", "rollout.enable_offload=true")
    assert found["rollout.enable_cuda_graph"] == ("warning", "policy-cuda-graph-recaptured")
    cfg = compose_and_check("libero_spatial", "pi0", None, [
        "rollout.enable_cuda_graph=true", "rollout.enable_torch_compile=true",
        "rollout.torch_compile_mode=default"]).cfg
    line = rollout_speed(cfg)
    assert line.startswith("compiled (default;") and "CUDA-graphed" in line
