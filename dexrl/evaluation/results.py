"""``results.json`` (versioned schema, written durably at the end: :mod:`dexrl.runs.durable`), the
per-episode progress file a killed run leaves behind, the output folder's guard, and paired
comparisons.

Design notes: docs/cli.md (results.json) and docs/design/evaluation.md.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from dexrl.errors import DexrlError
from dexrl.evaluation.episode_loop import EpisodeResult
from dexrl.evaluation.protocol import protocol_differences, protocol_of
from dexrl.evaluation.stats import mcnemar_exact, wilson_interval
from dexrl.runs.layout import EVALS

SCHEMA = "dexrl-eval-results"
SCHEMA_VERSION = 1
RESULTS_FILE = "results.json"
PROGRESS_FILE = "progress.jsonl"
LOG_FILE = "eval.log"  # third-party output (robosuite, gym, warnings) unless --verbose
OWNED = (RESULTS_FILE, PROGRESS_FILE, LOG_FILE, "videos")  # what --overwrite may remove
SUCCESS_METRIC = ("success_once: the env reported task success within max_episode_steps "
                  "(the episode ends at the first success, as in LIBERO's own evaluation)")
_REQUIRED = ("suite", "config", "per_task", "overall", "episodes")
SCENE_SEED_RULES = {
    "training": "numpy SeedSequence([seed, task_id, trial_id, 1]); LIBERO's np.random is seeded "
                "with it right before the episode's reset",
    "standard": "np.random is seeded with the protocol's scene seed (7) before trial 0 of each "
                "task; trials 1, 2, ... of that task reset in order in the same env after it",
}


def rate_summary(successes: int, episodes: int) -> dict[str, Any]:
    """k, n, k/n and its Wilson 95 % interval."""
    low, high = wilson_interval(successes, episodes)
    return {"successes": successes, "episodes": episodes, "success_rate": successes / episodes,
            "ci95": [low, high]}


def summarize(episodes: Sequence[EpisodeResult], languages: Mapping[int, str]
              ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per-task and overall success rates with Wilson intervals and mean episode lengths."""
    per_task = []
    for task_id in sorted({e.task_id for e in episodes}):
        mine = [e for e in episodes if e.task_id == task_id]
        per_task.append({"task_id": task_id, "language": languages.get(task_id, ""),
                         **rate_summary(sum(e.success for e in mine), len(mine)),
                         "mean_length": sum(e.length for e in mine) / len(mine)})
    overall = {**rate_summary(sum(e.success for e in episodes), len(episodes)),
               "mean_length": sum(e.length for e in episodes) / len(episodes)}
    return per_task, overall


def build_results(*, suite: str, checkpoint: Mapping[str, Any], config: Mapping[str, Any],
                  seed: int, episodes: Sequence[EpisodeResult], languages: Mapping[int, str],
                  wall_time_s: float, environment: Mapping[str, Any],
                  reference: list[dict[str, Any]] | None = None,
                  comparison: dict[str, Any] | None = None,
                  blind_bound: float | None = None, protocol: dict[str, Any] | None = None,
                  partial: dict[str, Any] | None = None) -> dict[str, Any]:
    """Assemble the ``results.json`` content (see the module docstring); ``partial`` says why
    only some of the planned episodes are in it."""
    per_task, overall = summarize(episodes, languages)
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "wall_time_s": round(wall_time_s, 3),
        "suite": suite,
        "complete": partial is None,
        "partial": partial,
        "protocol": protocol,
        "success_metric": SUCCESS_METRIC,
        "checkpoint": dict(checkpoint),
        "config": dict(config),
        "seeds": {"seed": seed,
                  "noise_seed_rule": "numpy SeedSequence([seed, task_id, trial_id]); one "
                                     "torch.Generator per episode draws each call's noise",
                  "scene_seed_rule": SCENE_SEED_RULES[(protocol or {}).get("name", "training")]},
        **environment,
        "per_task": per_task,
        "overall": overall,
        "episodes": [asdict(e) for e in episodes],
        "reference": reference,
        "comparison": comparison,
        "blind_bound": None if blind_bound is None else {
            "success_rate": blind_bound,
            "above": overall["ci95"][0] > blind_bound,
            "meaning": "no policy that ignores the instruction and the image succeeds more "
                       "often (dexrl.reach.rules.CuedTask.blind_bound); above: the 95 % "
                       "interval's low end exceeds it"},
    }


class ProgressLog:
    """``progress.jsonl``: a header line, then one line per finished episode, flushed at once.

    A killed run leaves every finished episode here; ``results.json`` appears only at the end.
    """

    def __init__(self, path: Path, header: Mapping[str, Any]) -> None:
        self.path = Path(path)
        self._handle = open(self.path, "w", encoding="utf-8")  # noqa: SIM115 - lives with self
        self._write({"header": dict(header)})

    def episode(self, result: EpisodeResult) -> None:
        """Append one finished episode."""
        self._write({"episode": asdict(result)})

    def close(self) -> None:
        """Close the file."""
        self._handle.close()

    def _write(self, record: Mapping[str, Any]) -> None:
        self._handle.write(json.dumps(record, default=str) + "\n")
        self._handle.flush()


def check_out_dir(out: Path, overwrite: bool) -> list[Path]:
    """Refuse an output folder holding another evaluation's files (unless ``overwrite``).

    Nothing is changed here; returns what :func:`claim_out_dir` will remove.
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise DexrlError("the output path is a file", "choose a folder with --out", where=str(out),
                         code="eval-out-is-a-file")
    found = [out / name for name in OWNED if (out / name).exists()]
    if found and not overwrite:
        raise DexrlError("the output folder already holds another evaluation "
                         f"({', '.join(p.name for p in found)})",
                         "choose another --out, or add --overwrite to replace it", where=str(out),
                         code="eval-out-not-empty")
    return found


def claim_out_dir(out: Path, stale: Iterable[Path]) -> None:
    """Create the output folder and remove the previous evaluation's files."""
    for path in stale:
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    Path(out).mkdir(parents=True, exist_ok=True)


def load_results(path: Path) -> dict[str, Any]:
    """Read and check a ``results.json`` (for ``--compare`` and model cards).

    Raises:
        DexrlError: missing, unreadable, another schema, or a newer schema version.
    """
    path = Path(path)
    if path.is_dir():
        path = path / RESULTS_FILE
    if not path.is_file():
        raise DexrlError("results file not found", "pass the results.json of a finished "
                         "`dexrl eval` run (a killed run only has progress.jsonl)", where=str(path),
                         code="results-not-found")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DexrlError(f"cannot read results: {exc}", "pass an intact results.json",
                         where=str(path), code="results-unreadable") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise DexrlError("not a dexrl eval results file", "pass a results.json written by "
                         "`dexrl eval`", where=str(path), code="results-wrong-schema")
    version = data.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise DexrlError(f"results schema version {version} is newer than this dexrl reads "
                         f"({SCHEMA_VERSION})", "upgrade dexrl", where=str(path),
                         code="results-schema-too-new")
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise DexrlError(f"results file lacks {', '.join(missing)}", "pass an intact results.json",
                         where=str(path), code="results-incomplete")
    return data


def find_results(run_dir: Path | None, step: int | None) -> Path | None:
    """The newest results.json under ``RUN_DIR/eval`` that evaluated global step ``step`` of
    ``run_dir`` (the model card ``dexrl export`` writes carries its table), preferring a complete
    one (an evaluation an env failure stopped is marked partial) without env overrides (a masked
    evaluation is not the checkpoint's score)."""
    if run_dir is None or not (run_dir / EVALS).is_dir():
        return None
    found = []
    for path in (run_dir / EVALS).rglob(RESULTS_FILE):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        ckpt = data.get("checkpoint", {}) if isinstance(data, dict) else {}
        if ckpt.get("step") == step and ckpt.get("run_dir") == str(run_dir):
            config = data.get("config")
            plain = not (config.get("env_overrides") if isinstance(config, dict) else None)
            complete = data.get("complete", True) is not False  # older files: complete
            found.append((complete, plain, str(data.get("created", "")), path))
    return max(found)[-1] if found else None


def check_same_suite(suite: str, other: Mapping[str, Any], other_path: str) -> None:
    """Refuse to pair results of different suites (their task ids mean different tasks)."""
    if other["suite"] != suite:
        raise DexrlError(f"--compare results are for {other['suite']}, this run is {suite}",
                         "compare results of the same suite", where=other_path,
                         code="compare-suite-mismatch")


def compare(mine: Mapping[str, Any], other: Mapping[str, Any], other_path: str
            ) -> dict[str, Any]:
    """Paired comparison on the (task, trial) episodes both results share.

    Returns per-task successes and deltas (this - other) and an exact McNemar test over all
    shared pairs, plus the config values that differ between the runs.

    Raises:
        DexrlError: other suite, or no shared episode.
    """
    check_same_suite(mine["suite"], other, other_path)
    a = {(e["task_id"], e["trial_id"]): bool(e["success"]) for e in mine["episodes"]}
    b = {(e["task_id"], e["trial_id"]): bool(e["success"]) for e in other["episodes"]}
    shared = sorted(a.keys() & b.keys())
    if not shared:
        raise DexrlError("the two evaluations share no (task, trial) episode",
                         "evaluate the same tasks and trials (e.g. the same --tasks and "
                         "--episodes-per-task)", where=other_path,
                         code="compare-no-shared-episodes")
    per_task = []
    for task_id in sorted({t for t, _ in shared}):
        keys = [k for k in shared if k[0] == task_id]
        ka, kb = sum(a[k] for k in keys), sum(b[k] for k in keys)
        per_task.append({"task_id": task_id, "pairs": len(keys), "successes": ka,
                         "other_successes": kb, "delta": (ka - kb) / len(keys)})
    test = mcnemar_exact(sum(a[k] and not b[k] for k in shared),
                         sum(b[k] and not a[k] for k in shared))
    ka, kb = sum(a[k] for k in shared), sum(b[k] for k in shared)
    differs = {k: [mine["config"].get(k), other["config"].get(k)]
               for k in sorted(set(mine["config"]) | set(other["config"]))
               if k not in ("sources",) and mine["config"].get(k) != other["config"].get(k)}
    return {
        "other": other_path,
        "other_checkpoint": other.get("checkpoint", {}).get("path"),
        "pairs": len(shared),
        "only_here": len(a.keys() - b.keys()),
        "only_other": len(b.keys() - a.keys()),
        "per_task": per_task,
        "overall": {"successes": ka, "other_successes": kb, "delta": (ka - kb) / len(shared),
                    "mcnemar": {"only_this_succeeded": test.only_a,
                                "only_other_succeeded": test.only_b,
                                "p_value": test.p_value}},
        "config_differences": differs,
        "protocol_differences": protocol_differences(protocol_of(mine), protocol_of(other)),
    }
