"""The one error type users see: what is wrong, where, and how to fix it."""

from __future__ import annotations


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
