"""Episode videos named by task, trial and outcome, and the index.html gallery."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dexrl.errors import DexrlError
from dexrl.evaluation.videos import VideoRecorder, video_name, write_gallery
from dexrl.vec_env import Episode


def record(recorder: VideoRecorder, task: int, trial: int, success: bool, frames: int = 5):
    video = recorder.start(Episode(task, trial, 0, 0))
    if video is None:
        return None
    for step in range(frames):
        frame = np.full((32, 32, 3), 40 * step, dtype=np.uint8)
        video.add(frame, 255 - frame)
    return video.finish(success)


def test_all_keeps_every_episode(tmp_path: Path) -> None:
    import imageio.v2 as imageio

    recorder = VideoRecorder(tmp_path, "all")
    assert record(recorder, 3, 7, True) == "videos/task03_trial07_success.mp4"
    assert record(recorder, 3, 8, False) == "videos/task03_trial08_failure.mp4"
    assert sorted(p.name for p in (tmp_path / "videos").iterdir()) == [
        "task03_trial07_success.mp4", "task03_trial08_failure.mp4"]
    path = tmp_path / "videos" / "task03_trial08_failure.mp4"
    frames = list(imageio.get_reader(str(path), format="FFMPEG").iter_data())
    assert len(frames) == 5 and frames[0].shape == (32, 64, 3)  # main | wrist


def test_failures_drops_successes_and_none_records_nothing(tmp_path: Path) -> None:
    recorder = VideoRecorder(tmp_path / "f", "failures")
    assert record(recorder, 0, 0, True) is None
    assert record(recorder, 0, 1, False) == "videos/task00_trial01_failure.mp4"
    assert [p.name for p in (tmp_path / "f" / "videos").iterdir()] == [
        "task00_trial01_failure.mp4"]
    assert record(VideoRecorder(tmp_path / "n", "none"), 0, 0, False) is None
    assert not (tmp_path / "n").exists()
    with pytest.raises(DexrlError) as err:
        VideoRecorder(tmp_path, "best")
    assert err.value.code == "eval-video-mode-unknown"


def test_gallery(tmp_path: Path) -> None:
    episodes = [{"task_id": 1, "trial_id": 0, "success": False, "length": 220,
                 "video": "videos/" + video_name(1, 0, False)},
                {"task_id": 0, "trial_id": 2, "success": True, "length": 97,
                 "video": "videos/" + video_name(0, 2, True)},
                {"task_id": 0, "trial_id": 3, "success": True, "length": 90, "video": None}]
    (tmp_path / "videos").mkdir()
    languages = {0: "put <the> bowl", 1: "open"}
    page = write_gallery(tmp_path, episodes, languages, "spatial").read_text()
    assert page.index("Task 0") < page.index("Task 1")
    assert 'src="task00_trial02_success.mp4"' in page and "trial 2: success, 97 steps" in page
    assert "put &lt;the&gt; bowl" in page and "trial 3" not in page
    assert write_gallery(tmp_path, episodes[2:], {}, "x") is None
