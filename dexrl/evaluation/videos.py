"""Episode videos (mp4, main camera beside the wrist camera) and an ``index.html`` gallery."""

from __future__ import annotations

import contextlib
import errno
import html
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dexrl.errors import DexrlError
from dexrl.runs import durable
from dexrl.vec_env import Episode

VIDEO_MODES = ("none", "failures", "all")
VIDEO_DIR = "videos"
FPS = 20  # LIBERO's control frequency: the video plays in real time
_LOW_SPACE = 1 << 20  # bytes: less left where a video failed means the disk filled up


def check_mode(mode: str) -> str:
    """Validate ``--video``."""
    if mode not in VIDEO_MODES:
        raise DexrlError(f"unknown video mode '{mode}'", f"use one of: {', '.join(VIDEO_MODES)}",
                         where="--video", code="eval-video-mode-unknown")
    return mode


def video_name(task_id: int, trial_id: int, success: bool) -> str:
    """``task03_trial07_success.mp4``: sorts by task, then trial."""
    return f"task{task_id:02d}_trial{trial_id:02d}_{'success' if success else 'failure'}.mp4"


class Mp4Video:
    """Streams one episode's frames to a temporary mp4; named by outcome when finished.

    Frames go to ffmpeg as they arrive, so a 520-step episode never sits in memory.
    """

    def __init__(self, folder: Path, episode: Episode, keep_successes: bool) -> None:
        import imageio.v2 as imageio

        self._folder = folder
        self._episode = episode
        self._keep_successes = keep_successes
        self._partial = folder / f".task{episode.task_id:02d}_trial{episode.trial_id:02d}.part.mp4"
        self._done = False
        self._writer: Any = imageio.get_writer(str(self._partial), format="FFMPEG", fps=FPS,
                                               codec="libx264",
                                               macro_block_size=2, ffmpeg_log_level="error")

    def add(self, main: np.ndarray, wrist: np.ndarray) -> None:
        """Append one step: the two uint8 [H, W, 3] frames side by side."""
        try:
            self._writer.append_data(np.concatenate([main, wrist], axis=1))
        except OSError as exc:
            self.discard()
            full = self._disk_full(exc)
            if full is None:
                raise
            raise full from exc

    def discard(self) -> None:
        """Stop recording and remove the unfinished file (an aborted evaluation keeps none)."""
        if self._done:
            return
        self._done = True
        with contextlib.suppress(Exception):  # the file goes anyway
            self._writer.close()
        self._partial.unlink(missing_ok=True)

    def _disk_full(self, exc: OSError) -> OSError | None:
        """ffmpeg writes the file: its failure reaches us as a broken pipe, without errno; a
        disk with (almost) no space left where the video was going is what stopped it."""
        try:
            if exc.errno is not None or shutil.disk_usage(self._folder).free >= _LOW_SPACE:
                return None
        except OSError:
            return None
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self._partial))

    def finish(self, success: bool) -> str | None:
        """Close the file; return its path relative to the output folder, or None if dropped."""
        self._done = True
        name = video_name(self._episode.task_id, self._episode.trial_id, success)
        try:
            self._writer.close()
            if success and not self._keep_successes:
                return None
            durable.publish(self._partial, self._folder / name)
        finally:
            self._partial.unlink(missing_ok=True)  # dropped, or failed to publish
        return f"{VIDEO_DIR}/{name}"


class VideoRecorder:
    """Starts a :class:`Mp4Video` per episode according to ``--video``."""

    def __init__(self, out_dir: Path, mode: str) -> None:
        self.mode = check_mode(mode)
        self.folder = Path(out_dir) / VIDEO_DIR
        self._started: list[Mp4Video] = []
        if self.mode != "none":
            self.folder.mkdir(parents=True, exist_ok=True)

    def start(self, episode: Episode) -> Mp4Video | None:
        """A recorder for ``episode``, or None when videos are off."""
        if self.mode == "none":
            return None
        video = Mp4Video(self.folder, episode, keep_successes=self.mode == "all")
        self._started.append(video)
        return video

    def discard_unfinished(self) -> None:
        """Stop the videos of the episodes still running and remove their files (the
        evaluation was aborted: a full disk, Ctrl-C)."""
        for video in self._started:
            video.discard()  # a finished one stays
        self._started.clear()


def write_gallery(out_dir: Path, episodes: Sequence[Mapping[str, Any]],
                  languages: Mapping[int, str], title: str) -> Path | None:
    """Write ``videos/index.html`` showing every kept video, grouped by task; None if no video.

    Args:
        out_dir: The evaluation's output folder.
        episodes: Episode records (``task_id``, ``trial_id``, ``success``, ``length``, ``video``).
        languages: Task id -> instruction.
        title: Page title (suite and checkpoint).
    """
    kept = [e for e in episodes if e.get("video")]
    if not kept:
        return None
    sections = []
    for task_id in sorted({e["task_id"] for e in kept}):
        cards = []
        for e in sorted((e for e in kept if e["task_id"] == task_id), key=lambda e: e["trial_id"]):
            outcome = "success" if e["success"] else "failure"
            src = html.escape(Path(e["video"]).name)
            cards.append(
                f'<figure class="{outcome}"><video src="{src}" controls muted loop '
                f'preload="metadata" width="384"></video><figcaption>trial {e["trial_id"]}: '
                f'{outcome}, {e["length"]} steps</figcaption></figure>')
        language = html.escape(languages.get(task_id, ""))
        sections.append(f"<h2>Task {task_id}: {language}</h2>\n<div>{''.join(cards)}</div>")
    page = (
        "<!doctype html>\n<html><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title><style>"
        "body{font-family:sans-serif;margin:1em}figure{display:inline-block;margin:.5em}"
        ".success figcaption{color:#17803d}.failure figcaption{color:#b42318}"
        f"</style></head><body>\n<h1>{html.escape(title)}</h1>\n"
        + "\n".join(sections) + "\n</body></html>\n"
    )
    path = Path(out_dir) / VIDEO_DIR / "index.html"
    return durable.write_text(path, page)
