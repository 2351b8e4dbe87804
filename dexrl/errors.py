"""What users see when something is wrong: :class:`DexrlError` (stops a command; what, where,
the fix and a stable code) and :class:`Finding` (one problem a check found)."""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field
from typing import Any, Literal


class DexrlError(Exception):
    """An expected failure, rendered as ``error: <what> [<code>]`` + ``hint: <fix>``, exit code 2.

    Args:
        message: What is wrong, in one line.
        hint: The next step that fixes it.
        code: The failure's stable name, kebab-case with a family prefix (``run-folder-not-empty``,
            ``hub-repo-not-found``): a literal at the raise site, listed in docs/errors.md. The
            message and hint may be reworded; the code stays.
        where: Optional location (file, config key, flag) the problem was found at.
        details: Optional extra lines (e.g. every problem found by a check run).
    """

    exit_code = 2

    def __init__(
        self,
        message: str,
        hint: str | None = None,
        *,
        code: str,
        where: str | None = None,
        details: list[str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.code = code
        self.where = where
        self.details = details or []

    def __reduce__(self) -> tuple[Any, ...]:
        # Exception pickles as cls(*args), which would lose the keyword-only code (Ray and
        # multiprocessing pickle exceptions across processes); rebuild from the attributes.
        return _rebuild, (type(self), self.args), self.__dict__

    def render(self) -> str:
        """Return the text printed on stderr."""
        head = f"error: {self.message}"
        if self.where:
            head = f"error: {self.where}: {self.message}"
        lines = [f"{head} [{self.code}]", *(f"  {d}" for d in self.details)]
        if self.hint:
            lines.append(f"hint: {self.hint}")
        return "\n".join(lines)

    def document(self) -> dict[str, Any]:
        """The ``--json`` error document's fields (the CLI adds ``"schema": "dexrl.error/1"``)."""
        return {"code": self.code, "message": self.message, "where": self.where,
                "hint": self.hint, "details": list(self.details)}


def _rebuild(cls: type[DexrlError], args: tuple[Any, ...]) -> DexrlError:
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    return error


Level = Literal["error", "warning"]


@dataclass(frozen=True)
class Finding:
    """One problem found by a check.

    Attributes:
        level: ``error`` stops a launch; ``warning`` only informs (``--strict`` promotes it).
        where: The config key, file or flag the problem is at.
        message: What is wrong.
        hint: How to fix it.
        code: The kind of problem, a stable kebab-case name (``placement-gpu-count``), given as a
            keyword: a literal where dexrl makes the finding, listed under "Finding codes" in
            docs/errors.md, or the code of the :class:`DexrlError` it was made from. Programs tell
            findings apart by ``(code, where)``; the message may be reworded. Never printed
            in text; ``--json`` documents carry it (:meth:`document`).
            Empty only for a plugin's finding that gives none.
    """

    level: Level
    where: str
    message: str
    hint: str
    code: str = field(default="", kw_only=True)

    def render(self) -> str:
        """One line for the terminal."""
        return f"{self.where}: {self.message} (fix: {self.hint})"

    def document(self) -> dict[str, str]:
        """The finding in a ``--json`` document (``validate``, ``train --dry-run``)."""
        return {"level": self.level, "code": self.code, "where": self.where,
                "message": self.message, "hint": self.hint}


def errors(findings: list[Finding]) -> list[Finding]:
    """The findings that stop a launch."""
    return [f for f in findings if f.level == "error"]


def one_line(exc: BaseException, *, typed: bool = True, words: int | None = None) -> str:
    """``Type: message`` of an exception on one line (runs of whitespace become one space).

    Args:
        typed: Lead with the exception's type name; ``False`` gives the bare message.
        words: Keep only the message's first ``words`` words.
    """
    parts = str(exc).split()
    text = " ".join(parts if words is None else parts[:words])
    if not typed:
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def findings_from(exc: DexrlError, where: str) -> list[Finding]:
    """One finding per detail line of ``exc`` (one for the message when it has none), each with
    the error's code."""
    hint = exc.hint or "restore the file from the original checkpoint"
    lines = [f"{exc.message}: {d}" for d in exc.details] or [exc.message]
    return [Finding("error", exc.where or where, line, hint, code=exc.code) for line in lines]


DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def disk_full_cause(exc: BaseException | None) -> OSError | None:
    """The full disk or exhausted quota (ENOSPC, EDQUOT) ``exc`` is or was raised from (through
    ``__cause__``/``__context__``), one naming its file first; an error that carries the errno
    only in its text (:func:`disk_full_in_text`) counts too. None when there is none."""
    found: list[OSError] = []
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS:
            found.append(exc)
        elif (from_text := disk_full_in_text(str(exc))) is not None:
            found.append(from_text)
        exc = exc.__cause__ or exc.__context__
    return next((f for f in found if f.filename), found[0] if found else None)


def disk_full(exc: BaseException | None) -> bool:
    """Whether ``exc`` is, or was raised from, a full disk (:func:`disk_full_cause`)."""
    return disk_full_cause(exc) is not None


def disk_full_in_text(text: str, path: str | os.PathLike[str] | None = None) -> OSError | None:
    """The full disk an error's ``text`` reports where the error itself carries no errno (Rust
    libraries' "(os error 28)", a copy's gathered "[Errno 28] ..." lines), as an OSError at
    ``path``; None when the text reports none."""
    for code in sorted(DISK_FULL_ERRNOS):
        if f"(os error {code})" in text or f"[Errno {code}]" in text:
            return OSError(code, os.strerror(code), *([str(path)] if path is not None else []))
    return None


def disk_full_folder(exc: BaseException, default: str | os.PathLike[str]) -> str:
    """The folder a disk-full ``exc`` was writing into (its file's folder), else ``default``."""
    name = getattr(exc, "filename", None)
    if isinstance(name, bytes):
        name = os.fsdecode(name)
    if not isinstance(name, str) or not name:
        return str(default)
    return name if os.path.isdir(name) else (os.path.dirname(name) or str(default))


def disk_full_error(folder: str | os.PathLike[str], *, facts: list[str] | None = None,
                    hint: str | None = None) -> DexrlError:
    """The one ``[disk-full]`` error: the folder that could not be written and what dexrl knows
    (``facts``: the space a save needs, the last complete checkpoint), joined into one line."""
    message = "; ".join([f"the disk is full: cannot write to {folder}", *(facts or [])])
    return DexrlError(message, hint or "free space on that disk (or write to a larger one), "
                      "then run the command again", code="disk-full")
