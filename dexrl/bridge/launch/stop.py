"""Ctrl-C and SIGTERM during a launch: one stop, however many signals arrive.

A terminal's Ctrl-C reaches the whole foreground process group and people press it twice; a
scheduler sends SIGTERM before it kills. Python's default turns each SIGINT into a
``KeyboardInterrupt`` wherever the main thread happens to be, clean-up code included. Here the
first signal requests the stop (raised as :class:`Interrupted` only while the launch starts up,
when nothing is being cleaned up yet); later signals are acknowledged and otherwise ignored, so
the clean-up (workers and Ray stopped, ``run-state.json`` closed) always finishes.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """The launch was asked to stop by ``signum``; its exit code is ``128 + signum``."""

    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        """130 for SIGINT (Ctrl-C), 143 for SIGTERM."""
        return 128 + self.signum


class StopSignals:
    """The launch's SIGINT and SIGTERM handler (installed from the main thread only).

    Args:
        say: Prints one line on the terminal (from the signal handler: it must not raise).
    """

    def __init__(self, say: Callable[[str], None]) -> None:
        self.signum: int | None = None
        self.requested = threading.Event()
        self.may_raise = True  # start-up: the first signal raises Interrupted at once
        self._say = say
        self._previous: dict[int, Any] = {}
        self._repeated = False

    def say_with(self, say: Callable[[str], None]) -> None:
        """Print this handler's lines with ``say`` from now on (the launch's output, once it
        routes everything else to the log)."""
        self._say = say

    def install(self) -> None:
        """Take SIGINT and SIGTERM (again after Ray's ``init`` set its own SIGTERM handler)."""
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in SIGNALS:
            previous = signal.signal(signum, self._handle)
            self._previous.setdefault(signum, previous)

    def restore(self) -> None:
        """Give the signals back to the handlers found at the first :meth:`install` once the
        launch is over; after a stop the handler stays, silent: the process is ending, and a
        Ctrl-C pressed a moment late must not kill it before it printed how to go on."""
        if self.signum is not None:
            self._repeated = True
            return
        if threading.current_thread() is not threading.main_thread():
            return
        for signum, previous in self._previous.items():
            with contextlib.suppress(TypeError, ValueError):
                signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
        self._previous.clear()

    def check(self) -> None:
        """Raise :class:`Interrupted` if a stop was requested."""
        if self.signum is not None:
            raise Interrupted(self.signum)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is None:
            self.signum = signum
            self.requested.set()
            self._tell(f"{signal.Signals(signum).name} received: stopping the run (workers, "
                       "then Ray; a few seconds)")
            if self.may_raise:
                raise Interrupted(signum)
            return
        if not self._repeated:
            self._repeated = True
            self._tell("already stopping: the run folder is being closed, please wait")

    def _tell(self, text: str) -> None:
        with contextlib.suppress(Exception):  # a handler must not fail (reentrant print)
            self._say(text)
