"""Evaluation protocols: ``standard`` (the published LIBERO protocol, exactly) and ``training``
(the run's own settings), each field with its source; and how two protocols are compared.

Design notes: docs/design/evaluation.md#protocols.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dexrl.errors import DexrlError

PROTOCOLS = ("standard", "training")
OPENPI = "openpi examples/libero/main.py"
OPENVLA = "OpenVLA experiments/robot/libero/run_libero_eval.py"
DEXBOTIC = "Dexbotic's LIBERO client (dexmal/dexbotic-benchmark)"

STANDARD_SETTLE_STEPS = 10
STANDARD_SCENE_SEED = 7
STANDARD_NUM_STEPS = 10
STANDARD_CAMERA = 256
STANDARD_TRIALS = 50
# Actions executed per policy call ("replan steps") of the published protocols, per model type.
STANDARD_REPLAN = {"dexbotic_pi0": 5, "dexbotic_dm0": 10}
TRAINING_SETTLE_STEPS = 15  # RLinf 0.3.0's LiberoEnv.reset, hard-coded: what training saw

# What a field means and where the standard value comes from.
STANDARD_SOURCES = {
    "episodes_per_task": f"{OPENPI} num_trials_per_task=50 (also {OPENVLA}): LIBERO's 50 "
                         "fixed initial states of each task, trial i from state i",
    "max_episode_steps": f"{OPENPI} max_steps per suite (220/280/300/520/400)",
    "settle_steps": f"{OPENPI} num_steps_wait=10 (also {OPENVLA}): [0]*6+[-1] after "
                    "set_init_state, not counted in the horizon",
    "scene_seed": f"{OPENPI} seed=7: np.random.seed(7) and env.seed(7) once per task, then "
                  "trials 0,1,2,... reset in order in one env",
    "camera": f"{OPENPI} LIBERO_ENV_RESOLUTION=256 (256x256 agentview and wrist cameras)",
    "image_flip": f"{OPENPI} img[::-1, ::-1] on both cameras (RLinf's get_libero_image does "
                  "the same)",
    "action_chunk": f"{OPENPI} replan_steps=5 for π0; Dexbotic's example_pi0_libero.yaml and "
                    "RLinf's Dexbotic docs: π0 5, DM0 10 (dexbotic-benchmark's "
                    "example_dm0_libero.yaml replans 12)",
    "num_steps": "Dexbotic's and RLinf's LIBERO evaluations of Dexbotic π0/DM0: 10 denoising "
                 "steps",
}


@dataclass(frozen=True)
class Protocol:
    """How episodes are run, apart from which ones (tasks, trials) and the policy's noise.

    Attributes:
        name: ``standard`` or ``training``.
        settle_steps: Gripper-open steps after the initial state is set (not counted).
        scene_seed: ``standard``: the seed of ``np.random`` once per task, trials in order in
            one env; None: one seed per (task, trial) from ``--seed`` (``training``).
        deviations: Flags and overrides that changed a value the protocol fixes.
    """

    name: str
    settle_steps: int
    scene_seed: int | None
    deviations: tuple[str, ...] = ()

    @property
    def exact(self) -> bool:
        """The published protocol with nothing changed."""
        return self.name == "standard" and not self.deviations


def default_protocol(form: str, libero: bool) -> str:
    """``standard`` for a Dexbotic checkpoint folder on LIBERO, else ``training``."""
    return "standard" if form == "dexbotic" and libero else "training"


def check_protocol(name: str, libero: bool, suite: str) -> str:
    """``name`` if it applies to ``suite``.

    Raises:
        DexrlError: an unknown name, or ``standard`` on a dexrl task.
    """
    if name not in PROTOCOLS:
        raise DexrlError(f"unknown protocol '{name}'", f"use one of {', '.join(PROTOCOLS)}",
                         where="--protocol", code="eval-protocol-unknown")
    if name == "standard" and not libero:
        raise DexrlError(f"{suite} is a dexrl task: the standard protocol is LIBERO's",
                         "use --protocol training (the default for dexrl tasks)",
                         where="--protocol", code="eval-protocol-unavailable")
    return name


def protocol_record(protocol: Protocol, config: Mapping[str, Any], sources: Mapping[str, str],
                    camera: str | None = None) -> dict[str, Any]:
    """results.json's ``protocol``: the name, each field's value and source, the deviations.

    Args:
        protocol: The protocol run.
        config: The settings' record (:meth:`EvalSettings.record`).
        sources: Where each setting came from.
        camera: The cameras' ``HxW`` (None: not a LIBERO suite).
    """
    standard = protocol.name == "standard"
    seeding = (f"np.random.seed({protocol.scene_seed}) once per task, trials in order in one "
               "env" if protocol.scene_seed is not None else
               "one seed per (task, trial) from --seed, right before each reset")
    fields = {
        "episodes_per_task": (config["episodes_per_task"], sources.get("episodes_per_task", "")),
        "max_episode_steps": (config["max_episode_steps"], sources["max_episode_steps"]),
        "settle_steps": (protocol.settle_steps, STANDARD_SOURCES["settle_steps"] if standard
                         else "RLinf's LiberoEnv.reset (15, what training runs)"),
        "scene_seed": (seeding, STANDARD_SOURCES["scene_seed"] if standard
                       else "dexrl: the scene depends on the episode alone"),
        "camera": (camera, STANDARD_SOURCES["camera"] if standard
                   else "the run's env init_params, else env/<suite>.yaml"),
        "image_flip": ("180° rotation of both cameras", STANDARD_SOURCES["image_flip"]),
        "action_chunk": (config["action_chunk"], sources["action_chunk"]),
        "num_steps": (config["num_steps"], sources["num_steps"]),
    }
    return {"name": protocol.name, "exact": protocol.exact,
            "deviations": list(protocol.deviations),
            "fields": {k: {"value": v, "source": s} for k, (v, s) in fields.items()}}


LEGACY = ("an older results.json without a protocol: written by the rules --protocol training "
          "follows (per-episode scene seeds, 15 settle steps)")


def protocol_of(results: Mapping[str, Any]) -> dict[str, Any]:
    """The ``protocol`` of a results.json; an older file without one is read as ``training``
    with its own config's values (:data:`LEGACY`)."""
    found = results.get("protocol")
    if isinstance(found, dict) and "name" in found:
        return dict(found)
    config = results.get("config", {})
    return {"name": "training", "exact": False, "deviations": [], "legacy": LEGACY,
            "fields": {k: {"value": v} for k, v in (
                ("max_episode_steps", config.get("max_episode_steps")),
                ("settle_steps", TRAINING_SETTLE_STEPS),
                ("scene_seed", "one seed per (task, trial) from --seed, right before each "
                               "reset"),
                ("action_chunk", config.get("action_chunk")),
                ("num_steps", config.get("num_steps")))}}


# Fields that decide how an episode runs (episodes_per_task only decides which are run).
_COMPARED = ("max_episode_steps", "settle_steps", "scene_seed", "camera", "action_chunk",
             "num_steps")


def protocol_differences(mine: Mapping[str, Any], other: Mapping[str, Any]
                         ) -> dict[str, list[Any]]:
    """Protocol name and fields that differ between two results.json ``protocol`` records
    (a field one of them does not record is not compared)."""
    differs: dict[str, list[Any]] = {}
    for key in ("name", "deviations"):
        if (mine.get(key) or []) != (other.get(key) or []):
            differs[key] = [mine.get(key), other.get(key)]
    a, b = mine.get("fields", {}), other.get("fields", {})
    for key in _COMPARED:
        if key in a and key in b and a[key].get("value") != b[key].get("value"):
            differs[key] = [a[key].get("value"), b[key].get("value")]
    return differs


def check_same_protocol(mine: Mapping[str, Any], other: Mapping[str, Any], other_path: str
                        ) -> None:
    """Refuse to pair this evaluation's protocol record with ``other`` results of another one.

    Raises:
        DexrlError: the protocols differ (``--allow-protocol-mismatch`` skips this check).
    """
    theirs = protocol_of(other)
    differs = protocol_differences(mine, theirs)
    if differs:
        shown = "; ".join(f"{k} {a} here, {b} there" for k, (a, b) in differs.items())
        raise DexrlError(f"--compare results ran another protocol ({shown})",
                         f"evaluate both with the same --protocol (e.g. --protocol "
                         f"{mine['name']}), or add --allow-protocol-mismatch to pair them anyway",
                         where=other_path, code="compare-protocol-mismatch")
