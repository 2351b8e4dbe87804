"""``dexrl doctor``: prove that this machine and its Ray cluster can run a launch.

Every check is a small pure function over facts (gathered by separate probe functions) that
returns one :class:`CheckResult`. Areas (``stack``, ``cuda``, ``render``, ``libero``, ``cluster``,
``extension``, ``checkpoint``) pair probes with checks; :mod:`dexrl.doctor.schedule` runs them under
a time budget and :mod:`dexrl.doctor.report` renders the results.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from dexrl.errors import one_line

Status = Literal["ok", "warn", "fail", "skip"]
STATUSES: tuple[Status, ...] = ("ok", "warn", "fail", "skip")

GIB = 1024**3


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one check.

    Attributes:
        id: Stable dotted name, ``<area>.<check>`` (e.g. ``ray.nodes``).
        status: ``ok``, ``warn`` (informs, does not fail), ``fail`` or ``skip`` (not run).
        finding: One line saying what was found.
        fix: The next step, for anything not ``ok`` (for ``skip``: how to run it).
        details: Facts behind the finding, for ``--json``.
        seconds: Wall time of the probe(s) behind the check, when measured.
    """

    id: str
    status: Status
    finding: str
    fix: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    seconds: float | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}")
        if self.status != "ok" and not self.fix:
            raise ValueError(f"{self.id}: a '{self.status}' result needs a fix")

    def timed(self, seconds: float) -> CheckResult:
        """The same result with its probe time attached."""
        return CheckResult(self.id, self.status, self.finding, self.fix, self.details, seconds)


def ok(id: str, finding: str, **details: Any) -> CheckResult:  # noqa: A002 - a check's id
    """An ``ok`` result."""
    return CheckResult(id, "ok", finding, "", details)


def warn(id: str, finding: str, fix: str, **details: Any) -> CheckResult:  # noqa: A002
    """A ``warn`` result: worth knowing, does not stop a launch."""
    return CheckResult(id, "warn", finding, fix, details)


def fail(id: str, finding: str, fix: str, **details: Any) -> CheckResult:  # noqa: A002
    """A ``fail`` result: a launch would fail or misbehave."""
    return CheckResult(id, "fail", finding, fix, details)


def skip(id: str, finding: str, fix: str, **details: Any) -> CheckResult:  # noqa: A002
    """A ``skip`` result: the check did not run."""
    return CheckResult(id, "skip", finding, fix, details)


CRASH_FIX = "this is a bug in dexrl doctor: report it with the output of `dexrl doctor --markdown`"


def guarded(id: str, check: Callable[..., CheckResult], *args: Any) -> CheckResult:  # noqa: A002
    """Run one check; a check that raises becomes that check's ``fail`` with the exception."""
    try:
        return check(*args)
    except Exception as exc:  # a crashing check must not stop the others
        return fail(id, f"check crashed: {one_line(exc)}", CRASH_FIX)
