"""Where a run's output goes: :class:`Output` sends everything the process prints (Python and C
level, RLinf's tables and the worker logs Ray forwards) to the run's log file, while the main
thread can still reach the terminal."""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO


class _Local(threading.local):
    terminal = False


class _Routed(io.TextIOBase):
    """A text stream that writes to the terminal only from a thread inside ``terminal()``.

    Writes to the log never raise: a run whose disk filled up must still report that (on the
    terminal) instead of failing again while logging the failure.
    """

    def __init__(self, log: TextIO, term: TextIO, local: _Local) -> None:
        super().__init__()
        self._log, self._term, self._local = log, term, local

    def _target(self) -> TextIO:
        return self._term if self._local.terminal else self._log

    def write(self, text: str) -> int:
        if self._local.terminal:
            return self._term.write(text)
        try:
            return self._log.write(text)
        except OSError:  # the log's disk is full: the text is lost, the run goes on
            return len(text)

    def flush(self) -> None:
        with contextlib.suppress(OSError):  # a full disk under the log (see write)
            self._log.flush()
        self._term.flush()

    def isatty(self) -> bool:
        return self._target().isatty()

    def fileno(self) -> int:
        return self._target().fileno()

    @property
    def encoding(self) -> str:
        return getattr(self._target(), "encoding", "utf-8")


class Output:
    """Route this process's stdout and stderr to ``log_path`` (unless verbose), reversibly.

    File descriptors 1 and 2 are pointed at the log, so C-level output and streams bound before
    (logging handlers, Ray's) follow. ``sys.stdout``/``sys.stderr`` become routers that reach the
    terminal only inside :meth:`terminal`, from the thread that entered it.
    """

    def __init__(self, log_path: Path, verbose: bool) -> None:
        self.log_path, self.verbose = log_path, verbose
        self._local = _Local()
        self._saved_fds: tuple[int, int] | None = None
        self._saved_streams: tuple[Any, Any] | None = None
        self._terms: list[TextIO] = []

    def __enter__(self) -> Output:
        if self.verbose:
            return self
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        sys.stdout.flush()
        sys.stderr.flush()
        self._saved_fds = (os.dup(1), os.dup(2))
        log_fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.close(log_fd)
        self._saved_streams = (sys.stdout, sys.stderr)
        self._terms = [_terminal(stream, fd, saved) for stream, fd, saved in
                       zip(self._saved_streams, (1, 2), self._saved_fds, strict=True)]
        sys.stdout = _Routed(sys.__stdout__ or self._terms[0], self._terms[0], self._local)
        sys.stderr = _Routed(sys.__stderr__ or self._terms[1], self._terms[1], self._local)
        return self

    def stream(self, err: bool = False) -> TextIO:
        """The terminal's stdout (or stderr), writable from any thread (e.g. a progress bar)."""
        if self._terms:
            return self._terms[err]
        return sys.stderr if err else sys.stdout

    @contextlib.contextmanager
    def terminal(self) -> Iterator[None]:
        """Within this block, this thread's ``print`` and ``sys.std*`` writes reach the terminal."""
        previous = self._local.terminal
        self._local.terminal = True
        try:
            yield
        finally:
            sys.stdout.flush()
            self._local.terminal = previous

    def say(self, text: str) -> None:
        """Print one line on the terminal."""
        with self.terminal():
            print(text, flush=True)

    def __exit__(self, *exc: object) -> None:
        if self._saved_fds is None:
            return
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        sys.stdout, sys.stderr = self._saved_streams  # type: ignore[misc]
        for std_fd, saved in zip((1, 2), self._saved_fds, strict=True):
            os.dup2(saved, std_fd)
            os.close(saved)
        for term in self._terms:
            if term not in self._saved_streams:  # opened here on a duplicate of fd 1 or 2
                term.close()
        self._terms = []
        self._saved_fds = None


def _terminal(stream: TextIO, fd: int, saved_fd: int) -> TextIO:
    """Where terminal output goes once fd ``fd`` points at the log: a stream on its saved copy,
    or ``stream`` itself when it does not write to ``fd`` (a test runner's capture)."""
    try:
        if stream.fileno() != fd:
            return stream
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation: no file descriptor
        return stream
    return open(os.dup(saved_fd), "w", buffering=1, encoding="utf-8", errors="replace")  # noqa: SIM115
