"""Pure checks shared by ``validate``, ``train``, ``doctor`` and ``download``.

A check takes facts (a config, a directory, machine facts) and returns findings; it never prints,
exits or changes anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Level = Literal["error", "warning"]


@dataclass(frozen=True)
class Finding:
    """One problem found by a check.

    Attributes:
        level: ``error`` stops a launch; ``warning`` only informs (``--strict`` promotes it).
        where: The config key, file or flag the problem is at.
        message: What is wrong.
        hint: How to fix it.
    """

    level: Level
    where: str
    message: str
    hint: str

    def render(self) -> str:
        """One line for the terminal."""
        return f"{self.where}: {self.message} (fix: {self.hint})"


def errors(findings: list[Finding]) -> list[Finding]:
    """The findings that stop a launch."""
    return [f for f in findings if f.level == "error"]
