"""Image preprocessing equals transformers' SiglipImageProcessor on the same config."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from PIL import Image

from dexrl.errors import DexrlError
from dexrl.models.images import ImagePreprocessor
from dexrl.models.tiny_files import write_preprocessor_config


def _frames(batch: int, height: int, width: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (batch, height, width, 3), dtype=np.uint8)


def _reference(directory: Path, frames: np.ndarray) -> torch.Tensor:
    processor = transformers.SiglipImageProcessor.from_pretrained(directory)
    return processor(list(frames), return_tensors="pt")["pixel_values"]


@pytest.mark.parametrize(("size", "image_size", "resample"),
                         [(256, 224, 3), (256, 32, 3), (224, 224, 3), (100, 32, 2)])
def test_matches_siglip_processor(
    tmp_path: Path, size: int, image_size: int, resample: int
) -> None:
    write_preprocessor_config(tmp_path, image_size, resample=resample)
    frames = _frames(3, size, size)
    ours = ImagePreprocessor.from_checkpoint(tmp_path)(frames)
    expected = _reference(tmp_path, frames)
    assert ours.dtype == torch.float32 and ours.shape == (3, 3, image_size, image_size)
    assert torch.equal(ours, expected)
    assert ours.min() >= -1 and ours.max() <= 1


def test_torch_input_and_custom_normalization(tmp_path: Path) -> None:
    write_preprocessor_config(tmp_path, 48)
    config_path = tmp_path / "preprocessor_config.json"
    config = json.loads(config_path.read_text())
    config.update(image_mean=[0.48, 0.45, 0.4], image_std=[0.26, 0.26, 0.27], resample=1)
    config_path.write_text(json.dumps(config))
    frames = _frames(2, 64, 64, seed=1)
    ours = ImagePreprocessor.from_checkpoint(tmp_path)(torch.from_numpy(frames))
    assert torch.equal(ours, _reference(tmp_path, frames))


def test_non_square_frames_are_padded_black_and_centered(tmp_path: Path) -> None:
    write_preprocessor_config(tmp_path, 32)
    frames = _frames(2, 40, 64, seed=2)
    ours = ImagePreprocessor.from_checkpoint(tmp_path)(frames)
    squares = []
    for frame in frames:  # LLaVA-style expand-to-square with a black background
        canvas = Image.new("RGB", (64, 64), (0, 0, 0))
        canvas.paste(Image.fromarray(frame), (0, (64 - 40) // 2))
        squares.append(np.asarray(canvas))
    assert torch.equal(ours, _reference(tmp_path, np.stack(squares)))

    tall = ImagePreprocessor(size=(10, 10), do_resize=False, do_normalize=False,
                             do_rescale=False)(_frames(1, 10, 7, seed=3))
    # 3 padding columns: 1 on the left, 2 on the right.
    assert not tall[0, :, :, :1].any() and not tall[0, :, :, -2:].any()


@pytest.mark.parametrize(("size", "expected"), [
    (24, (24, 24)), ({"shortest_edge": 24}, (24, 24)), ({"height": 24, "width": 16}, (24, 16)),
])
def test_size_forms(tmp_path: Path, size: object, expected: tuple[int, int]) -> None:
    (tmp_path / "preprocessor_config.json").write_text(json.dumps({"size": size, "crop_size": 8}))
    processor = ImagePreprocessor.from_checkpoint(tmp_path)
    assert processor.size == expected
    assert processor(_frames(1, 30, 30)).shape == (1, 3, *expected)


@pytest.mark.parametrize(("content", "code"), [
    (None, "model-preprocessor-missing"),
    ("{", "model-json-unreadable"),
    ('{"size": "big"}', "model-preprocessor-invalid"),
    ('{"resample": 42}', "model-preprocessor-invalid"),
    ('{"image_mean": [0.5, 0.5]}', "model-preprocessor-invalid"),
])
def test_bad_config_is_a_user_error(tmp_path: Path, content: str | None, code: str) -> None:
    if content is not None:
        (tmp_path / "preprocessor_config.json").write_text(content)
    with pytest.raises(DexrlError) as info:
        ImagePreprocessor.from_checkpoint(tmp_path)
    assert info.value.code == code
    assert info.value.where.endswith("preprocessor_config.json") and info.value.hint


def test_rejects_non_uint8_frames() -> None:
    with pytest.raises(ValueError, match="uint8"):
        ImagePreprocessor()(np.zeros((1, 8, 8, 3), dtype=np.float32))


def _preprocess_in_child(queue: object) -> None:
    queue.put(ImagePreprocessor(size=(16, 16))(_frames(4, 20, 20)).shape)  # type: ignore[attr-defined]


@pytest.mark.spawns
def test_resize_pool_survives_fork() -> None:
    import multiprocessing

    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork start method on this platform")
    ImagePreprocessor(size=(16, 16))(_frames(4, 20, 20))  # start the parent's pool first
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_preprocess_in_child, args=(queue,))
    child.start()
    child.join(timeout=30)
    if child.exitcode is None:  # a pool inherited from the parent deadlocks the child
        child.kill()
    assert child.exitcode == 0 and queue.get(timeout=1) == (4, 3, 16, 16)
