"""What users see when something is wrong: :class:`DexrlError` (stops a command) and
:class:`Finding` (one problem a check found).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


class DexrlError(Exception):
    """An expected failure, rendered as ``error: <what>`` + ``hint: <fix>`` with exit code 2.

    Args:
        message: What is wrong, in one line.
        hint: The next step that fixes it.
        where: Optional location (file, config key, flag) the problem was found at.
        details: Optional extra lines (e.g. every problem found by a check run).
    """

    exit_code = 2

    def __init__(
        self,
        message: str,
        hint: str | None = None,
        *,
        where: str | None = None,
        details: list[str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.where = where
        self.details = details or []

    def render(self) -> str:
        """Return the text printed on stderr."""
        head = f"error: {self.message}"
        if self.where:
            head = f"error: {self.where}: {self.message}"
        lines = [head, *(f"  {d}" for d in self.details)]
        if self.hint:
            lines.append(f"hint: {self.hint}")
        return "\n".join(lines)


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


def one_line(exc: BaseException) -> str:
    """``Type: message`` of an exception on one line."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
