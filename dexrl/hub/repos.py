"""The hub repositories dexrl has a config for (``dexrl download --list``)."""

from __future__ import annotations

from dataclasses import dataclass

from dexrl.catalog import POLICIES


@dataclass(frozen=True)
class KnownRepo:
    """A hub repository dexrl has a config for."""

    repo_id: str
    policy: str
    description: str

    @property
    def model_type(self) -> str:
        """The checkpoint's ``model_type``: that of its built-in policy in the catalog."""
        return POLICIES[self.policy].model_type


KNOWN_REPOS: dict[str, KnownRepo] = {
    r.repo_id: r
    for r in (
        KnownRepo("Dexmal/libero-db-pi0", "pi0",
                  "Dexbotic π0 trained on LIBERO; the start point of RLinf's π0 PPO recipes"),
        KnownRepo("Dexmal/DM0-libero", "dm0",
                  "Dexbotic DM0 trained on LIBERO; the start point of RLinf's DM0 PPO recipes"),
    )
}
