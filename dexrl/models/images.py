"""Camera-frame preprocessing for π0, equal to the checkpoint's SiglipImageProcessor.

Frames are padded to a square with black (centered, as Dexbotic's ``pad`` aspect mode does; LIBERO
frames are square already), resized with PIL using the configured filter, then rescaled and
normalized in float32 exactly as transformers' ``SiglipImageProcessor`` does.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from dexrl.errors import DexrlError

_HINT = (
    "copy preprocessor_config.json from the base π0 checkpoint (SiglipImageProcessor: "
    '"size": {"height": 224, "width": 224}, "resample": 3, "image_mean"/"image_std": 0.5)'
)


@dataclass(frozen=True)
class ImagePreprocessor:
    """uint8 frames [B, H, W, 3] -> float32 pixel values [B, 3, height, width].

    Args:
        size: Output (height, width).
        resample: PIL filter id (3 = bicubic).
        do_resize: Whether to resize (otherwise frames must already have ``size`` after padding).
        do_rescale: Multiply by ``rescale_factor`` (in float64, then cast, as transformers does).
        rescale_factor: Usually 1/255.
        do_normalize: Subtract ``image_mean`` and divide by ``image_std`` per channel in float32.
        image_mean: Per-channel mean.
        image_std: Per-channel std.
        pad_value: Fill of the padding that makes non-square frames square.
    """

    size: tuple[int, int] = (224, 224)
    resample: int = Image.Resampling.BICUBIC
    do_resize: bool = True
    do_rescale: bool = True
    rescale_factor: float = 1 / 255
    do_normalize: bool = True
    image_mean: tuple[float, float, float] = (0.5, 0.5, 0.5)
    image_std: tuple[float, float, float] = (0.5, 0.5, 0.5)
    pad_value: int = 0

    @classmethod
    def from_checkpoint(cls, directory: str | Path) -> ImagePreprocessor:
        """Read ``preprocessor_config.json`` of a checkpoint directory (``crop_size`` is ignored:
        Dexbotic forces it to ``size``)."""
        path = Path(directory) / "preprocessor_config.json"
        if not path.is_file():
            raise DexrlError("preprocessor_config.json not found", _HINT, where=str(path),
                             code="model-preprocessor-missing")
        try:
            config = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise DexrlError(f"cannot read JSON: {err}", _HINT, where=str(path),
                             code="model-json-unreadable") from err
        if not isinstance(config, dict):
            raise DexrlError("expected a JSON object", _HINT, where=str(path),
                             code="model-json-not-object")
        try:
            return cls(
                size=_parse_size(config.get("size", {"height": 224, "width": 224})),
                resample=int(config.get("resample", Image.Resampling.BICUBIC)),
                do_resize=bool(config.get("do_resize", True)),
                do_rescale=bool(config.get("do_rescale", True)),
                rescale_factor=float(config.get("rescale_factor", 1 / 255)),
                do_normalize=bool(config.get("do_normalize", True)),
                image_mean=_per_channel(config.get("image_mean", 0.5)),
                image_std=_per_channel(config.get("image_std", 0.5)),
            )
        except (TypeError, ValueError, KeyError) as err:
            raise DexrlError(f"invalid image settings: {err}", _HINT, where=str(path),
                             code="model-preprocessor-invalid") from err

    def __post_init__(self) -> None:
        if self.resample not in set(Image.Resampling):
            raise ValueError(f"unknown PIL resample filter {self.resample}")
        if min(self.size) < 1 or min(self.image_std) == 0:
            raise ValueError("size must be positive and image_std non-zero")

    def __call__(self, images: torch.Tensor | np.ndarray) -> torch.Tensor:
        """Preprocess a batch of uint8 RGB frames [B, H, W, 3] (torch or numpy, any device).

        Returns float32 [B, 3, height, width] on the input's device (CPU for numpy).
        """
        device = images.device if isinstance(images, torch.Tensor) else torch.device("cpu")
        pixels = self.resize(images).permute(0, 3, 1, 2)
        return self.normalize(pixels).contiguous().to(device)

    def resize(self, images: torch.Tensor | np.ndarray) -> torch.Tensor:
        """Pad and resize uint8 RGB frames [B, H, W, 3] (torch or numpy, any device) with PIL.

        Returns uint8 [B, height, width, 3] on the CPU: what :meth:`normalize` then turns into
        pixel values, on whichever device the model runs.
        """
        frames = images.cpu().numpy() if isinstance(images, torch.Tensor) else np.asarray(images)
        if frames.dtype != np.uint8 or frames.ndim != 4 or frames.shape[-1] != 3 or not len(frames):
            raise ValueError(
                f"expected uint8 frames [B, H, W, 3], got {frames.dtype} {list(frames.shape)}"
            )
        # PIL releases the GIL while resizing, so threads give a near-linear speed-up.
        return torch.from_numpy(np.stack(list(_pool().map(self._resize, frames))))

    def normalize(self, pixels: torch.Tensor) -> torch.Tensor:
        """Rescale and normalize uint8 pixels [N, 3, height, width] on their own device.

        The same float64 rescale and float32 normalization as :meth:`__call__` (bit-identical on
        any device), without host tensors: it may run inside a compiled graph or a CUDA graph.
        Returns float32 [N, 3, height, width].
        """
        if self.do_rescale:
            pixels = (pixels.to(torch.float64) * self.rescale_factor).to(torch.float32)
        else:
            pixels = pixels.to(torch.float32)
        if not self.do_normalize:
            return pixels
        if len(set(self.image_mean)) == 1 and len(set(self.image_std)) == 1:
            return (pixels - _f32(self.image_mean[0])) / _f32(self.image_std[0])
        channels = [(pixels[:, c] - _f32(self.image_mean[c])) / _f32(self.image_std[c])
                    for c in range(3)]
        return torch.stack(channels, dim=1)

    def _resize(self, frame: np.ndarray) -> np.ndarray:
        """Pad one [H, W, 3] frame to a centered square, then resize it to ``size`` with PIL."""
        height, width = frame.shape[:2]
        if height != width:
            side = max(height, width)
            square = np.full((side, side, 3), self.pad_value, dtype=np.uint8)
            top, left = (side - height) // 2, (side - width) // 2
            square[top : top + height, left : left + width] = frame
            frame = square
        if frame.shape[:2] == self.size:
            return np.ascontiguousarray(frame)  # PIL returns a plain copy for a same-size resize
        if not self.do_resize:
            raise ValueError(f"frame is {frame.shape[:2]} but do_resize is off and size is "
                             f"{self.size}")
        out_h, out_w = self.size
        return np.asarray(Image.fromarray(frame).resize((out_w, out_h), resample=self.resample))


_POOL: tuple[int, ThreadPoolExecutor] | None = None


def _pool() -> ThreadPoolExecutor:
    """A per-process resize pool (recreated after a fork, whose child has no pool threads)."""
    global _POOL
    if _POOL is None or _POOL[0] != os.getpid():
        _POOL = (os.getpid(), ThreadPoolExecutor(min(8, os.cpu_count() or 1), "dexrl-resize"))
    return _POOL[1]


def _f32(value: float) -> float:
    """``value`` rounded to float32, as a float32 tensor of the statistics would hold it."""
    return float(np.float32(value))


def _parse_size(size: Any) -> tuple[int, int]:
    """``size`` as an int, ``{height, width}`` or ``{shortest_edge}`` -> (height, width).

    Frames are square after padding, so a shortest-edge resize is a square resize.
    """
    if isinstance(size, int) and not isinstance(size, bool):
        return size, size
    if isinstance(size, dict):
        if "height" in size and "width" in size:
            return int(size["height"]), int(size["width"])
        if "shortest_edge" in size:
            return int(size["shortest_edge"]), int(size["shortest_edge"])
    raise ValueError(f"size {size!r} is not an int, {{height, width}} or {{shortest_edge}}")


def _per_channel(value: float | Sequence[float]) -> tuple[float, float, float]:
    values = [float(value)] * 3 if isinstance(value, (int, float)) else [float(v) for v in value]
    if len(values) != 3:
        raise ValueError(f"expected 1 or 3 values per channel, got {len(values)}")
    return values[0], values[1], values[2]


__all__ = ["ImagePreprocessor"]
