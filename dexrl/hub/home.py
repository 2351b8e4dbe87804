"""Where dexrl keeps downloads (``$DEXRL_HOME``, default ``~/.cache/dexrl``) and where a repo id
is stored locally (``--ckpt`` becomes a folder in :mod:`dexrl.checkpoints.sources`)."""

from __future__ import annotations

import os
from pathlib import Path

from dexrl.errors import DexrlError


def dexrl_home() -> Path:
    """dexrl's data folder: ``$DEXRL_HOME``, else ``~/.cache/dexrl`` (the model configs' rule)."""
    value = os.environ.get("DEXRL_HOME")
    return Path(value) if value else Path.home() / ".cache" / "dexrl"


def check_repo_id(repo_id: str) -> str:
    """Return ``repo_id`` if the hub would accept it, else raise a DexrlError."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError:
        raise DexrlError(f"'{repo_id}' is not a Hugging Face repo id",
                         "give it as owner/name, e.g. Dexmal/libero-db-pi0 (`dexrl download "
                         "--list` shows the known ones)", where="REPO_ID",
                         code="hub-repo-id-invalid") from None
    return repo_id


def checkpoint_dir(repo_id: str) -> Path:
    """Default folder of a downloaded checkpoint: ``<dexrl_home>/checkpoints/<owner>/<name>``."""
    return dexrl_home() / "checkpoints" / Path(*check_repo_id(repo_id).split("/"))

