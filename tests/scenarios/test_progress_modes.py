"""What async runs (``--mode async``) change outside the config: the step line's data age and
time split, the TensorBoard step offset of their curves, the failed tasks that are RLinf polling
an empty channel, and the CUDA devices RLinf's async actor names on a CPU-only node."""

from __future__ import annotations

import io
import shutil
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest
import torch
from rich.console import Console

from dexrl.curves import ASYNC_TIME_SPLIT, TIME_SPLIT, logged_offset, read_run, time_split
from dexrl.training.progress import ProgressPrinter, staleness

SMOKE_RUN = Path(__file__).parents[1] / "fixtures" / "smoke_run"  # a sync run, no config.yaml
ASYNC_METRICS = {"rollout/data_staleness_0/ratio": 0.25, "rollout/data_staleness_1/ratio": 0.75,
                 "rollout/discarded_unused_trajs": 4.0}


# --- staleness --------------------------------------------------------------------------------


@pytest.mark.parametrize("metrics", [
    {},
    {"env/success_once": 0.5, "train/actor/policy_loss": 0.1, "time/generate_rollouts": 3.0},
    {"rollout/data_staleness_0/ratio": 0.0},  # a zero ratio alone says nothing
])
def test_a_sync_step_has_no_staleness(metrics: dict[str, float]) -> None:
    assert staleness(metrics) is None


def test_staleness_is_the_mean_and_most_versions_behind_and_the_dropped_count() -> None:
    # mean = (0 × 0.25 + 1 × 0.75) / 1.0 = 0.75, shown to one decimal
    assert staleness(ASYNC_METRICS) == "behind 0.8 (max 1)  dropped 4"


def test_staleness_ignores_zero_ratios() -> None:
    metrics = {"rollout/data_staleness_0/ratio": 0.5, "rollout/data_staleness_2/ratio": 0.5,
               "rollout/data_staleness_5/ratio": 0.0}
    assert staleness(metrics) == "behind 1.0 (max 2)"  # not max 5, and no dropped part


def test_staleness_of_a_step_that_only_dropped() -> None:
    assert staleness({"rollout/discarded_unused_trajs": 9.0}) == "dropped 9"
    assert staleness({"rollout/data_staleness_0/ratio": 0.0,
                      "rollout/discarded_unused_trajs": 0.0}) == "dropped 0"


def test_staleness_weights_versions_by_their_ratio() -> None:
    metrics = {"rollout/data_staleness_0/ratio": 0.5, "rollout/data_staleness_1/ratio": 0.5,
               "rollout/discarded_unused_trajs": 9}
    assert staleness(metrics) == "behind 0.5 (max 1)  dropped 9"


def test_staleness_reads_only_ratio_tags() -> None:
    metrics = {"rollout/data_staleness_3/count": 7.0, "rollout/data_staleness_x/ratio": 1.0,
               "rollout/data_staleness_1/ratio": 1.0}
    assert staleness(metrics) == "behind 1.0 (max 1)"


# --- the step line and the time split -----------------------------------------------------------


def test_time_split_picks_the_async_tags_when_the_async_runner_logged_them() -> None:
    async_tags = {tag for _, tag in ASYNC_TIME_SPLIT} | {"time/generate_rollouts"}
    assert time_split(async_tags) == ASYNC_TIME_SPLIT  # no "rollout" part beside training
    assert time_split({"time/actor_training"}) == (("training", "time/actor_training"),)


def test_time_split_of_a_sync_step() -> None:
    sync_tags = {tag for _, tag in TIME_SPLIT} | {"time/update_rollout_weights"}
    assert time_split(sync_tags) == TIME_SPLIT
    assert time_split({"time/generate_rollouts", "time/construct_rollout_batch"}) == (
        ("rollout", "time/generate_rollouts"),)
    assert time_split(set()) == ()


def step_line(**metrics: float) -> str:
    buf = io.StringIO()
    printer = ProgressPrinter(Console(file=buf, width=400))
    printer(SimpleNamespace(kind="step", step=3, total=10, elapsed_s=5.0, metrics=metrics,
                            checkpoint=None))
    return buf.getvalue().rstrip("\n")


def test_an_async_step_line_shows_the_data_age_then_the_async_time_split() -> None:
    line = step_line(**ASYNC_METRICS, **{
        "env/success_once": 0.5, "time/construct_rollout_batch": 1.0,
        "time/cal_adv_and_returns": 0.3, "time/actor_training": 7.0,
        "time/update_rollout_weights": 0.5})
    assert line == ("step 3/10  success 0.50  behind 0.8 (max 1)  dropped 4  time waiting=1.0s "
                    "advantages=0.3s training=7.0s weight_sync=0.5s")


def test_a_sync_step_line_has_no_data_age() -> None:
    line = step_line(**{"time/generate_rollouts": 2.0, "time/actor/run_training": 3.0})
    assert line == "step 3/10  time rollout=2.0s training=3.0s"


# --- logged_offset ------------------------------------------------------------------------------


@pytest.mark.parametrize(("config", "offset"), [
    (None, 1),  # no config.yaml
    ("runner:\n  mode: async\n", 0),
    ("runner:\n  mode: sync\n", 1),
    ("runner:\n  mode: pipeline\n  use_training_pipeline: true\n", 1),
    ("runner:\n  max_steps: 3\n", 1),
    ("runner: [unclosed\n", 1),  # unreadable: the verbs that need it say so
])
def test_logged_offset(tmp_path: Path, config: str | None, offset: int) -> None:
    if config is not None:
        (tmp_path / "config.yaml").write_text(config)
    assert logged_offset(tmp_path) == offset


def test_an_async_runs_curves_use_the_tensorboard_steps_as_they_are(tmp_path: Path) -> None:
    run_dir = Path(shutil.copytree(SMOKE_RUN, tmp_path / "run"))
    assert read_run(run_dir).series["env/return"][0] == [1, 2]  # sync: logged at k - 1
    (run_dir / "config.yaml").write_text("runner:\n  mode: async\n")
    assert read_run(run_dir).series["env/return"][0] == [0, 1]  # async: logged at k


# --- failed tasks that are RLinf polling an empty channel ---------------------------------------


def test_polled_empty() -> None:
    from dexrl.bridge.launch.failures import _polled_empty

    assert _polled_empty("asyncio.queues.QueueEmpty")
    assert _polled_empty("  asyncio.queues.QueueEmpty  ")
    assert _polled_empty("ray.util.queue.Empty: QueueEmpty")
    assert not _polled_empty("ValueError: bad shape")
    assert not _polled_empty("asyncio.queues.QueueFull")
    assert not _polled_empty("QueueEmpty handled, then RuntimeError: CUDA out of memory")
    assert not _polled_empty("")


def test_failed_task_causes_skip_empty_channel_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    import ray
    import ray.util.state

    from dexrl.bridge.launch.failures import failed_task_causes

    def task(name: str, error: str, kind: str = "TASK_EXECUTION_EXCEPTION") -> SimpleNamespace:
        return SimpleNamespace(func_or_class_name=name, name=name, error_message=error,
                               error_type=kind)

    tasks = [task("Channel.get_nowait", "Traceback (most recent call last):\n  File x\n"
                  "asyncio.queues.QueueEmpty\n"),
             task("DexrlEnv.interact", "The actor is dead because its worker process has died.",
                  "ACTOR_DIED"),  # told by the dead worker's record, not as a task failure
             task("DexrlAsyncActor.run_training", "Traceback (most recent call last):\n"
                  "RuntimeError: boom\n")]
    asked: list[str | None] = []
    context = SimpleNamespace(get_job_id=lambda: "01", gcs_address="10.0.0.9:6379")
    monkeypatch.setattr(ray, "get_runtime_context", lambda: context)

    def list_tasks(**kw: object) -> list[SimpleNamespace]:
        asked.append(kw.get("address"))  # type: ignore[arg-type]
        return tasks

    monkeypatch.setattr(ray.util.state, "list_tasks", list_tasks)
    causes = failed_task_causes(wait_s=0.0)
    assert [(name, last) for name, last, _ in causes] == [
        ("DexrlAsyncActor.run_training", "RuntimeError: boom")]
    assert asked == ["10.0.0.9:6379"]  # this run's Ray by its address, never "any on the machine"
    tasks.pop()  # only the poll and the death left: no failed task to report
    assert failed_task_causes(wait_s=0.0) == []


# --- on_cpu_devices -----------------------------------------------------------------------------


@pytest.fixture
def async_worker_module(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """RLinf's async actor module, with dexrl's CPU platform counted as installed (it is on this
    GPU-less machine; forced so the test reads the same on a node with a GPU)."""
    from dexrl.bridge.launch import async_workers, cpu_platform

    monkeypatch.setattr(cpu_platform, "is_installed", lambda: True)
    return async_workers.async_ppo_fsdp_worker


def test_on_cpu_devices_swaps_and_restores(async_worker_module: ModuleType) -> None:
    from dexrl.bridge.launch.async_workers import on_cpu_devices
    from dexrl.bridge.launch.cpu_platform import CPU_PLATFORM

    module = async_worker_module
    saved = module.torch, module.put_tensor_device, torch.Tensor.cuda
    assert module.torch is torch
    with on_cpu_devices():
        assert module.torch is not torch and module.torch.cuda is CPU_PLATFORM
        assert module.torch.zeros is torch.zeros  # everything else is torch itself
        assert module.put_tensor_device is not saved[1]
        moved = module.put_tensor_device({"x": torch.ones(2), "n": {"y": torch.ones(1)}}, "cuda:3")
        assert moved["x"].device.type == "cpu" and moved["n"]["y"].device.type == "cpu"
    assert (module.torch, module.put_tensor_device, torch.Tensor.cuda) == saved


def test_on_cpu_devices_restores_after_an_exception(async_worker_module: ModuleType) -> None:
    from dexrl.bridge.launch.async_workers import on_cpu_devices

    module = async_worker_module
    saved = module.torch, module.put_tensor_device, torch.Tensor.cuda
    with pytest.raises(KeyError, match="inside"), on_cpu_devices():
        assert module.torch is not torch
        raise KeyError("inside")
    assert (module.torch, module.put_tensor_device, torch.Tensor.cuda) == saved


def test_tensor_cuda_is_the_tensor_inside_the_block_only(async_worker_module: ModuleType) -> None:
    from dexrl.bridge.launch.async_workers import on_cpu_devices

    tensor = torch.zeros(2)
    with on_cpu_devices():
        moved = torch.zeros(2).cuda()
        assert moved.device.type == "cpu" and torch.equal(moved, tensor)
        assert tensor.cuda() is tensor
    if torch.cuda.is_available():
        assert tensor.cuda().device.type == "cuda"
    else:
        with pytest.raises((AssertionError, RuntimeError)):
            tensor.cuda()


def test_on_cpu_devices_changes_nothing_without_the_cpu_platform(
        async_worker_module: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    from dexrl.bridge.launch import cpu_platform
    from dexrl.bridge.launch.async_workers import on_cpu_devices

    monkeypatch.setattr(cpu_platform, "is_installed", lambda: False)
    module = async_worker_module
    saved = module.torch, module.put_tensor_device, torch.Tensor.cuda
    with on_cpu_devices():
        assert (module.torch, module.put_tensor_device, torch.Tensor.cuda) == saved
    assert (module.torch, module.put_tensor_device, torch.Tensor.cuda) == saved
