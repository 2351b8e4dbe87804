"""The rules of dexrl's built-in reach tasks: the instructions, and for ``reach_cued`` its
targets, cue colours, the success rate a context-blind policy cannot beat and the checks of its
settings (``env.*.reach_cued``).

The envs that step them are in :mod:`dexrl.reach.env`; why the bound holds is in
docs/learning.md ("The cued reach task").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dexrl.errors import Finding

# Colours a cue may take (RGB); the gripper and the background use none of them.
PALETTE: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40), "green": (40, 200, 60), "blue": (50, 90, 230),
    "yellow": (230, 210, 40), "magenta": (210, 60, 200), "cyan": (40, 200, 210),
    "orange": (240, 140, 30),
}
GRIPPER_RGB = (235, 235, 235)
BACKGROUND = 96
MIN_IMAGE_SIDE = 16  # below this the gripper disc (radius side/16) vanishes into a pixel
MIN_TARGETS = 2
SECTION = "reach_cued"
INSTRUCTION = "move the gripper to the green target"  # reach's one instruction


@dataclass(frozen=True)
class CuedTask:
    """One cued reach task, read from an env config's ``reach_cued`` section.

    Attributes:
        targets: The K target points (x, y, z); each episode names one, drawn uniformly.
        colors: The colour name of each target (keys of :data:`PALETTE`).
        instruction: The instruction template; ``{color}`` becomes the named target's colour.
        fixed_instruction: When set, every episode gets this text instead (an ablation: the
            instruction no longer names the target).
        show_cue: Draw the named target in the main camera image, a disc of its colour on a
            backdrop tinted with it (false: an ablation).
        success_radius: Success once the gripper is this close to the named target; entering
            another target's ball ends the episode as a failure.
    """

    targets: tuple[tuple[float, float, float], ...]
    colors: tuple[str, ...]
    instruction: str
    fixed_instruction: str | None
    show_cue: bool
    success_radius: float

    @classmethod
    def from_config(cls, section: Mapping[str, Any]) -> CuedTask:
        """Read a (checked) ``reach_cued`` section."""
        fixed = section.get("fixed_instruction")
        return cls(tuple(tuple(float(v) for v in t) for t in section["targets"]),
                   tuple(str(c) for c in section["colors"]), str(section["instruction"]),
                   None if fixed is None else str(fixed), bool(section["show_cue"]),
                   float(section["success_radius"]))

    def instruction_for(self, target: int) -> str:
        """The instruction of an episode that names ``target``."""
        if self.fixed_instruction is not None:
            return self.fixed_instruction
        return self.instruction.format(color=self.colors[target])

    @property
    def blind_bound(self) -> float:
        """The highest success rate of a policy that reads neither cue: 1/K.

        The targets' success balls are disjoint and the first one entered ends the episode, so
        without the cue the ball entered first is independent of the target named, and success
        is ``sum_i P(first = i) / K <= 1/K`` (targets are drawn uniformly).
        """
        return 1.0 / len(self.targets)


def languages(task: str, env_cfg: Mapping[str, Any]) -> dict[int, str]:
    """Goal index -> instruction of a built-in task (``reach``: one goal)."""
    if task != SECTION:
        return {0: INSTRUCTION}
    cued = CuedTask.from_config(env_cfg[SECTION])
    return {k: cued.instruction_for(k) for k in range(len(cued.targets))}


def blind_bound(task: str, env_cfg: Mapping[str, Any]) -> float | None:
    """The success rate no context-blind policy beats (``reach``, with one goal: none)."""
    return CuedTask.from_config(env_cfg[SECTION]).blind_bound if task == SECTION else None


def check_env(section: Any, init_params: Any, where: str = "") -> list[Finding]:
    """Problems of the cued task's settings in one env config (plain mappings of its
    ``reach_cued`` section and ``init_params``), at keys under ``where`` (``env.train``; empty
    for an env config alone). A camera size that is not a positive integer is the value schema's
    to report, so the image check skips it."""
    sides = [(init_params or {}).get(k) for k in ("camera_heights", "camera_widths")]
    valid = all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in sides)
    size = (sides[0], sides[1]) if valid else (MIN_IMAGE_SIDE, MIN_IMAGE_SIDE)
    return check_section(section or {}, size, f"{where}.{SECTION}" if where else SECTION)


def check_section(section: Any, image_size: tuple[int, int], where: str) -> list[Finding]:
    """Problems of a ``reach_cued`` section that the value schema cannot see, at ``where``.

    Checks the target count, one known colour per target, the ``{color}`` slot, the image size,
    and the geometry the blind bound needs: disjoint success balls, none reaching the start box.
    """
    def error(key: str, message: str, hint: str, *, code: str) -> Finding:
        return Finding("error", f"{where}.{key}", message, hint, code=code)

    targets, colors = section.get("targets"), section.get("colors")
    if not _is_points(targets):
        return [error("targets", f"{targets!r} is not a list of (x, y, z) points",
                      "write targets: [[x, y, z], ...]", code="reach-targets-not-points")]
    if len(targets) < MIN_TARGETS:
        return [error("targets", f"{len(targets)} target(s): a cue needs at least "
                      f"{MIN_TARGETS} places to choose from", "list 2 or more targets",
                      code="reach-too-few-targets")]
    findings = []
    if not isinstance(colors, Sequence) or isinstance(colors, str) or len(colors) != len(targets):
        count = len(colors) if isinstance(colors, Sequence) and not isinstance(colors, str) else 1
        findings.append(error("colors", f"{count} colour(s) for {len(targets)} targets",
                              f"give one colour per target, from: {', '.join(PALETTE)}",
                              code="reach-colors-count"))
    else:
        unknown = [c for c in colors if c not in PALETTE]
        if unknown or len(set(colors)) != len(colors):
            findings.append(error("colors", f"{list(colors)} has unknown or repeated colours",
                                  f"use distinct colours from: {', '.join(PALETTE)}",
                                  code="reach-colors-invalid"))
    if "{color}" not in str(section.get("instruction", "")):
        findings.append(error("instruction", "the template does not name the target",
                              "put {color} in it, e.g. 'reach the {color} target'",
                              code="reach-instruction-no-color"))
    if min(image_size) < MIN_IMAGE_SIDE:
        findings.append(Finding(
            "error", ".".join(filter(None, (where.rpartition(".")[0], "init_params"))),
            f"{image_size[0]}x{image_size[1]}"
            " pixel images are too small to draw the cue",
            f"set init_params.camera_heights and camera_widths to {MIN_IMAGE_SIDE} or more",
            code="reach-images-too-small"))
    radius, low, high = (section.get(k) for k in ("success_radius", "start_low", "start_high"))
    if isinstance(radius, (int, float)) and radius > 0 and _is_points([low, high]):
        findings += _check_geometry(targets, float(radius), low, high, error)
    return findings


def _is_points(value: Any) -> bool:
    return (isinstance(value, Sequence) and not isinstance(value, str)
            and all(isinstance(t, Sequence) and len(t) == 3
                    and all(isinstance(v, (int, float)) for v in t) for t in value))


def _check_geometry(targets: Sequence[Sequence[float]], radius: float, low: Sequence[float],
                    high: Sequence[float], error: Any) -> list[Finding]:
    findings = []
    for i in range(len(targets)):
        for j in range(i + 1, len(targets)):
            gap = math.dist(targets[i], targets[j])
            if gap <= 2 * radius:
                findings.append(error("success_radius", f"targets {i} and {j} are {gap:.3f} "
                                      f"apart, so their success balls (radius {radius}) overlap "
                                      "and a policy blind to the cue could beat 1/K",
                                      f"use a radius below {gap / 2:.3f} or move the targets",
                                      code="reach-success-balls-overlap"))
    for i, t in enumerate(targets):
        nearest = [min(max(v, lo), hi) for v, lo, hi in zip(t, low, high, strict=True)]
        if math.dist(t, nearest) < radius:
            findings.append(error("success_radius", f"target {i}'s success ball reaches the "
                                  "start box, so an episode could start inside it",
                                  "move the target or shrink the start box or the radius",
                                  code="reach-success-ball-at-start"))
    return findings
