"""RLinf's LIBERO env driven episode by episode: env failures as one error, then real envs in
subprocesses (slow)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dexrl.bridge.envs.libero import _env_failures
from dexrl.errors import DexrlError
from dexrl.hub.libero_assets import is_asset_tree, libero_assets_dir
from dexrl.vec_env import Episode

needs_libero = pytest.mark.skipif(not is_asset_tree(libero_assets_dir()),
                                  reason="LIBERO scene assets are not installed (`make install`)")


def test_an_env_failure_is_one_coded_error() -> None:
    with pytest.raises(DexrlError) as err, _env_failures("stepping envs 0, 1"):
        raise EOFError  # what the parent sees when an env subprocess died
    assert err.value.code == "eval-env-failed"
    assert err.value.message == "a LIBERO env failed while stepping envs 0, 1 (EOFError)"
    assert "eval.log" in err.value.hint
    with pytest.raises(DexrlError) as err, _env_failures("resetting env 1"):
        raise ValueError("executing action in terminated episode")
    assert "(ValueError: executing action in terminated episode)" in err.value.message


@pytest.mark.slow
@needs_libero

def test_resets_start_the_named_task_and_initial_state(tiny_pi0_dir) -> None:  # noqa: ANN001
    from dexrl.bridge.envs.libero import LiberoVecEnv, suite_info
    from dexrl.checkpoints.sources import resolve_checkpoint
    from dexrl.evaluation.request import EvalRequest
    from dexrl.evaluation.settings import env_config, resolve_settings

    info = suite_info("libero_spatial")
    assert len(info.languages) == 10 and set(info.init_states.values()) == {50}
    source = resolve_checkpoint(tiny_pi0_dir)
    settings = resolve_settings(source, EvalRequest(
        ckpt=str(tiny_pi0_dir), suite="libero_spatial", episodes_per_task=2, num_envs=2, seed=0,
        num_steps=2, action_chunk=2, max_episode_steps=10, video="none", device="cpu",
        dtype=None, env_overrides=()), [0, 3])
    env = LiberoVecEnv(env_config(settings, source), source.model_type, 2)
    try:
        first = env.reset([0, 1], [Episode(3, 4, 0, 7), Episode(0, 2, 0, 8)])
        assert list(env._env.task_ids) == [3, 0] and list(env._env.trial_ids) == [4, 2]
        assert first["task_descriptions"] == [info.languages[3], info.languages[0]]
        assert first["main_images"].shape == (2, 256, 256, 3)
        assert first["main_images"].dtype == torch.uint8 and first["states"].shape == (2, 8)
        # The same episode in the other slot, reset alone, starts from the same state and frame
        # (RLinf alone would seed that slot differently and move the fixtures).
        again = env.reset([1], [Episode(3, 4, 0, 7)])
        assert torch.equal(again["states"][1], first["states"][0])
        assert torch.equal(again["main_images"][1], first["main_images"][0])
        other_scene = env.reset([1], [Episode(3, 4, 0, 8)])
        assert torch.equal(other_scene["states"][1], first["states"][0])
        assert not torch.equal(other_scene["main_images"][1], first["main_images"][0])
        stepped = env.step_chunk(torch.zeros(2, 2, 7).numpy(), [0, 1])
        assert len(stepped.observations) == 2 and stepped.successes.shape == (2, 2)
    finally:
        env.close()


def _openpi_first_observations(suite: str, task_id: int, trials: int) -> list[dict]:
    """LIBERO driven as openpi's examples/libero/main.py does: one env for the task, seeded
    once with 7, then per trial reset, set_init_state(i) and 10 steps of [0]*6 + [-1]."""
    import os

    from libero.libero import benchmark, get_libero_path
    from libero.libero.envs import OffScreenRenderEnv
    from robosuite.utils.transform_utils import quat2axisangle

    tasks = benchmark.get_benchmark_dict()[suite]()
    task = tasks.get_task(task_id)
    env = OffScreenRenderEnv(bddl_file_name=os.path.join(
        get_libero_path("bddl_files"), task.problem_folder, task.bddl_file),
        camera_heights=256, camera_widths=256)
    firsts = []
    try:
        env.seed(7)
        for i in range(trials):
            env.reset()
            env.set_init_state(tasks.get_task_init_states(task_id)[i])
            for _ in range(10):
                obs, *_ = env.step([0.0] * 6 + [-1.0])
            firsts.append({
                "main": obs["agentview_image"][::-1, ::-1].copy(),
                "wrist": obs["robot0_eye_in_hand_image"][::-1, ::-1].copy(),
                "state": np.concatenate([obs["robot0_eef_pos"],
                                         quat2axisangle(obs["robot0_eef_quat"]),
                                         obs["robot0_gripper_qpos"]]),
                "sim": env.get_sim_state().copy()})
    finally:
        env.close()
    return firsts


@pytest.mark.slow
@needs_libero
@pytest.mark.parametrize(("suite", "task_id"), [("libero_spatial", 0), ("libero_10", 2)])
def test_standard_first_observations_equal_libero_s_own(tiny_pi0_dir, suite: str,  # noqa: ANN001
                                                        task_id: int) -> None:
    from dexrl.bridge.envs.libero import LiberoVecEnv, prepare_process
    from dexrl.checkpoints.sources import resolve_checkpoint
    from dexrl.evaluation.episodes import plan_episodes
    from dexrl.evaluation.request import EvalRequest
    from dexrl.evaluation.settings import env_config, resolve_settings

    prepare_process()
    trials = 3
    source = resolve_checkpoint(tiny_pi0_dir)
    settings = resolve_settings(source, EvalRequest(
        ckpt=str(tiny_pi0_dir), suite=suite, episodes_per_task=trials, num_envs=1,
        device="cpu"), [task_id])
    assert (settings.protocol, settings.settle_steps, settings.scene_seed) == ("standard", 10, 7)
    plan = plan_episodes([task_id], trials, {task_id: 50}, 0, task_scene_seed=7)
    env = LiberoVecEnv(env_config(settings, source), source.model_type, settings.action_chunk)
    ours = []
    try:
        for episode in plan:  # one env, trials in order, with steps between them
            obs = env.reset([0], [episode])
            ours.append({"main": obs["main_images"][0].numpy(),
                         "wrist": obs["wrist_images"][0].numpy(),
                         "state": obs["states"][0].numpy(),
                         "sim": env._env.env.get_sim_state()[0]})
            for _ in range(episode.trial_id + 1):
                env.step_chunk(np.zeros((1, settings.action_chunk, 7), np.float32), [0])
        # The control: trial 1 reseeded (a seed per episode) is another scene.
        reseeded = env.reset([0], [Episode(task_id, 1, 0, 7)])["main_images"][0].numpy()
    finally:
        env.close()
    theirs = _openpi_first_observations(suite, task_id, trials)
    for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        np.testing.assert_array_equal(a["sim"], b["sim"], err_msg=f"trial {i}: sim state")
        np.testing.assert_allclose(a["state"], b["state"], rtol=0, atol=1e-6,
                                   err_msg=f"trial {i}: robot state")
        np.testing.assert_array_equal(a["main"], b["main"], err_msg=f"trial {i}: agentview")
        np.testing.assert_array_equal(a["wrist"], b["wrist"], err_msg=f"trial {i}: wrist")
    assert not np.array_equal(reseeded, theirs[1]["main"])
