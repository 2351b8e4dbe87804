"""Open a run folder from any working directory, also after it was moved or copied: paths that
pointed inside its recorded location are re-anchored to where it is now
(docs/design/run-folders.md)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from dexrl.errors import DexrlError, one_line
from dexrl.runs.layout import CHECKPOINTS, CONFIG_FILE, checkpoint_step


def load_run_config(run_dir: Path) -> DictConfig:
    """The saved config of a run as written (see :func:`open_run` for one that was moved)."""
    path = Path(run_dir) / CONFIG_FILE
    if not path.is_file():
        raise DexrlError("not a dexrl run directory (no config.yaml)",
                         "pass the folder `dexrl train` created (e.g. runs/<name>)",
                         where=str(run_dir), code="run-no-config")
    try:
        cfg = OmegaConf.load(path)
    except Exception as exc:
        raise DexrlError(f"unreadable config.yaml ({one_line(exc, typed=False)})",
                         "restore the file from a backup", where=str(path),
                         code="run-config-unreadable") from None
    if not isinstance(cfg, DictConfig):
        raise DexrlError("config.yaml is not a mapping", "restore the file", where=str(path),
                         code="run-config-unreadable")
    return cfg


@dataclass(frozen=True)
class Run:
    """An opened run folder.

    Attributes:
        dir: Where the folder is now (absolute).
        config: Its saved config, paths re-anchored to ``dir``.
        manifest: Its ``manifest.json`` ({} when missing).
        moved_from: The folder's recorded location when it is not ``dir`` (moved or copied).
    """

    dir: Path
    config: DictConfig
    manifest: dict[str, Any]
    moved_from: Path | None


def find_run_folder(path: str | Path) -> Path:
    """The run folder at ``path`` (absolute, symlinks kept as the user named them).

    Raises:
        DexrlError: the path does not exist, is a file, or is a checkpoint folder.
    """
    given = Path(path).expanduser()
    run_dir = Path(os.path.abspath(given))  # normalizes "..", keeps symlinks as the user named them
    hint = "pass the folder `dexrl train` created (it holds config.yaml and manifest.json)"
    if not run_dir.exists():
        raise DexrlError("run folder does not exist", hint, where=str(given), code="run-not-found")
    if not run_dir.is_dir():
        raise DexrlError("a file, not a run folder", hint, where=str(given),
                         code="run-not-a-folder")
    step = checkpoint_step(run_dir)
    if step is not None and run_dir.parent.name == CHECKPOINTS:
        raise DexrlError("a checkpoint folder, not a run folder",
                         f"pass the run folder {run_dir.parent.parent} (with --step {step} where "
                         "the command has it)", where=str(given), code="run-is-a-checkpoint-folder")
    return run_dir


def relocate(data: dict[str, Any], run_dir: Path, relative: Iterable[tuple[str, ...]], cwd: Any,
             recorded: list[Any]) -> tuple[dict[str, Any], Path | None]:
    """Re-anchor the paths of a run folder that now lives at ``run_dir`` (see module doc).

    Args:
        data: The saved config as a plain container, interpolations unresolved.
        run_dir: Where the folder is now.
        relative: Key paths (``("a", "b")``) of paths recorded relative to ``cwd``.
        cwd: The working directory ``train`` ran in (the manifest's), if known.
        recorded: Where the folder was recorded to be (non-paths are skipped).

    Returns:
        The re-anchored container, and the first recorded location that was not ``run_dir``.
    """
    for keys in relative:
        *parents, leaf = keys
        node: Any = data
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        value = node.get(leaf) if isinstance(node, dict) else None
        if isinstance(value, str) and value and "${" not in value and isinstance(cwd, str) \
                and not Path(value).expanduser().is_absolute():
            node[leaf] = os.path.normpath(Path(cwd) / value)
    moved_from = None
    for old in dict.fromkeys(r for r in recorded if isinstance(r, str) and os.path.isabs(r)):
        if Path(old) != run_dir:
            data = _rebase(data, old.rstrip(os.sep), str(run_dir))
            moved_from = moved_from or Path(old)
    return data, moved_from


def _rebase(node: Any, old: str, new: str) -> Any:
    """Every string equal to ``old`` or below it, moved to ``new``."""
    if isinstance(node, dict):
        return {k: _rebase(v, old, new) for k, v in node.items()}
    if isinstance(node, list):
        return [_rebase(v, old, new) for v in node]
    if isinstance(node, str) and (node == old or node.startswith(old + os.sep)):
        return new + node[len(old):]
    return node
