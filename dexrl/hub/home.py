"""Where dexrl keeps downloads (``$DEXRL_HOME``, default ``~/.cache/dexrl``) and how ``--ckpt``
becomes a folder: a local path, or a repo id with a verified download."""

from __future__ import annotations

import os
from pathlib import Path

from dexrl.errors import DexrlError
from dexrl.hub.manifest import read_download_manifest


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


def resolve_ckpt(ckpt: str) -> Path:
    """A checkpoint path, or a hub repo id with a verified ``dexrl download``."""
    path = Path(ckpt).expanduser()
    if path.exists():
        return path.resolve()
    if ckpt.count("/") == 1 and not ckpt.startswith((".", "/", "~")):
        local = checkpoint_dir(ckpt)
        manifest = read_download_manifest(local) if local.is_dir() else None
        if manifest is not None and manifest.verified:
            return local
        raise DexrlError(f"checkpoint '{ckpt}' has no verified download in {local}",
                         f"run `dexrl download {ckpt}` first, or pass a local path",
                         where="--ckpt", code="hub-not-downloaded")
    raise DexrlError(f"checkpoint path does not exist: {ckpt}",
                     "pass a checkpoint directory or a repo id fetched by `dexrl download`",
                     where="--ckpt", code="checkpoint-not-found")
