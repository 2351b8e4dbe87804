"""A stand-in for the Hugging Face hub on 127.0.0.1, so download tests run without network.

It answers what ``huggingface_hub.snapshot_download`` asks: repo info at a revision (commit sha and
file list with sizes) and file resolution (``HEAD``/``GET`` with ``ETag``, ``X-Repo-Commit``,
``Content-Length`` and byte ranges for resumed downloads). Failures carry the hub's
``X-Error-Code`` header, which is how ``huggingface_hub`` tells a missing repo from a missing
revision or a gated one.
The server runs in a daemon thread on an ephemeral port and shuts itself down after ``lifetime``
seconds even if a test forgets to.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

_INFO = re.compile(r"^/api/(models|datasets)/(.+?)(?:/revision/([^/]+))?$")
_RESOLVE = re.compile(r"^/(datasets/)?([^/]+(?:/[^/]+)?)/resolve/([^/]+)/(.+)$")
_BAD_TOKEN = "Invalid credentials in Authorization header"


@dataclass
class FakeRepo:
    """A repository the stand-in serves.

    Attributes:
        repo_id: ``owner/name``.
        commits: Commit sha (40 hex) -> {path in repo: content}.
        refs: Branch or tag name -> commit sha.
        repo_type: ``model`` or ``dataset``.
        private: Visible only with the server's token (401/404 ``RepoNotFound`` otherwise).
        gated: Info is public, files need the server's token (401 ``GatedRepo`` otherwise).
    """

    repo_id: str
    commits: dict[str, dict[str, bytes]]
    refs: dict[str, str]
    repo_type: str = "model"
    private: bool = False
    gated: bool = False


@dataclass
class Seen:
    """One request the server answered."""

    method: str
    path: str
    range: str | None
    authorization: str | None


@dataclass
class HubServer:
    """The stand-in hub; use as a context manager and point ``HF_ENDPOINT`` at :attr:`url`.

    Attributes:
        repos: Served repositories by id.
        token: The one token the server accepts (``Authorization: Bearer <token>``).
        lifetime: Seconds after which the server stops itself.
        cut_downloads: (repo id, path) -> how many more full-file GETs to cut off half way.
        fail_paths: URL path -> HTTP error status to answer with (the hub having a bad moment).
        seen: Every request, in order.
    """

    repos: dict[str, FakeRepo] = field(default_factory=dict)
    token: str = "hf_stand_in_token"
    lifetime: float = 120.0
    cut_downloads: dict[tuple[str, str], int] = field(default_factory=dict)
    fail_paths: dict[str, int] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        daemon=True)
        self._timer = threading.Timer(self.lifetime, self._server.shutdown)
        self._timer.daemon = True

    @property
    def url(self) -> str:
        """The endpoint, e.g. ``http://127.0.0.1:54321``."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def add(self, repo: FakeRepo) -> FakeRepo:
        """Serve ``repo`` (replacing one with the same id)."""
        self.repos[repo.repo_id] = repo
        return repo

    def file_gets(self, path_suffix: str) -> list[Seen]:
        """The GET requests for files whose URL ends with ``path_suffix``."""
        return [s for s in self.seen if s.method == "GET" and s.path.endswith(path_suffix)]

    def __enter__(self) -> HubServer:
        self._thread.start()
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _record(self, seen: Seen) -> None:
        with self._lock:
            self.seen.append(seen)

    def _take_cut(self, repo_id: str, path: str) -> bool:
        with self._lock:
            left = self.cut_downloads.get((repo_id, path), 0)
            if left > 0:
                self.cut_downloads[(repo_id, path)] = left - 1
            return left > 0


def _handler_for(hub: HubServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # keep test output clean
            pass

        def do_HEAD(self) -> None:  # noqa: N802 - http.server's naming
            self._answer(body=False)

        def do_GET(self) -> None:  # noqa: N802
            self._answer(body=True)

        def _answer(self, body: bool) -> None:
            path = unquote(urlsplit(self.path).path)
            hub._record(Seen(self.command, path, self.headers.get("Range"),
                             self.headers.get("Authorization")))
            if path in hub.fail_paths:
                return self._error(hub.fail_paths[path], None, "Try again later")
            auth = self.headers.get("Authorization", "")
            if auth and auth != f"Bearer {hub.token}":
                return self._error(401, None, _BAD_TOKEN)
            authed = bool(auth)
            if match := _INFO.match(path):
                kind, repo_id, revision = match.groups()
                return self._info(kind[:-1], repo_id, unquote(revision or "main"), authed)
            if match := _RESOLVE.match(path):
                prefix, repo_id, revision, filename = match.groups()
                kind = "dataset" if prefix else "model"
                return self._file(kind, repo_id, revision, filename, authed, body)
            return self._error(404, None, "not a hub endpoint")

        def _repo(self, kind: str, repo_id: str, authed: bool) -> FakeRepo | None:
            repo = hub.repos.get(repo_id)
            if repo is None or repo.repo_type != kind or (repo.private and not authed):
                # The hub answers 401 to anonymous callers so as not to reveal private repos.
                self._error(401 if not authed else 404, "RepoNotFound", "Repository not found")
                return None
            return repo

        def _commit(self, repo: FakeRepo, revision: str) -> str | None:
            sha = repo.refs.get(revision, revision if revision in repo.commits else None)
            if sha is None:
                self._error(404, "RevisionNotFound", "Invalid rev id")
            return sha

        def _info(self, kind: str, repo_id: str, revision: str, authed: bool) -> None:
            repo = self._repo(kind, repo_id, authed)
            sha = self._commit(repo, revision) if repo else None
            if repo is None or sha is None:
                return
            files = repo.commits[sha]
            payload = {
                "id": repo.repo_id,
                "sha": sha,
                "private": repo.private,
                "gated": "auto" if repo.gated else False,
                "siblings": [{"rfilename": name, "size": len(data)}
                             for name, data in sorted(files.items())],
            }
            self._send(200, json.dumps(payload).encode(), {"Content-Type": "application/json"})

        def _file(self, kind: str, repo_id: str, revision: str, filename: str, authed: bool,
                  body: bool) -> None:
            repo = self._repo(kind, repo_id, authed)
            if repo is None:
                return
            if repo.gated and not authed:
                return self._error(401, "GatedRepo", "Access to this model is restricted")
            sha = self._commit(repo, revision)
            if sha is None:
                return
            data = repo.commits[sha].get(filename)
            if data is None:
                return self._error(404, "EntryNotFound", "Entry not found")
            headers = {"X-Repo-Commit": sha, "ETag": f'"{hashlib.sha256(data).hexdigest()}"',
                       "Accept-Ranges": "bytes"}
            start = _range_start(self.headers.get("Range"))
            status = 200
            if start:
                status = 206
                headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
            part = data[start:]
            if not body:
                return self._send(status, b"", {**headers, "Content-Length": str(len(part))})
            if start == 0 and hub._take_cut(repo_id, filename):
                # Promise the whole file, deliver half, hang up: a connection lost mid-transfer.
                self._send(status, part[: len(part) // 2], {**headers,
                                                          "Content-Length": str(len(part))})
                self.close_connection = True
                return
            self._send(status, part, headers)

        def _error(self, status: int, code: str | None, message: str) -> None:
            headers = {"X-Error-Message": message, "Content-Type": "application/json"}
            if code:
                headers["X-Error-Code"] = code
            self._send(status, json.dumps({"error": message}).encode(), headers)

        def _send(self, status: int, payload: bytes, headers: dict[str, str]) -> None:
            self.send_response(status)
            headers.setdefault("Content-Length", str(len(payload)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            if payload:
                self.wfile.write(payload)
                self.wfile.flush()

    return Handler


def _range_start(header: str | None) -> int:
    match = re.fullmatch(r"bytes=(\d+)-", header or "")
    return int(match.group(1)) if match else 0


def commit_sha(label: str) -> str:
    """A stable fake 40-hex commit sha for ``label``."""
    return hashlib.sha1(label.encode()).hexdigest()


def use_hub(server: HubServer, monkeypatch: Any, home: Path,
            unset: tuple[str, ...] = ()) -> None:
    """Point huggingface_hub and dexrl at ``server``, with ``home`` as dexrl's home: no token,
    offline mode or hf_transfer of this machine leaks in (``unset``: more variables to clear)."""
    from huggingface_hub import constants
    from huggingface_hub.utils import reset_sessions

    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.setenv("DEXRL_HOME", str(home))
    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", *unset):
        monkeypatch.delenv(var, raising=False)
    # Settings huggingface_hub read at import; a machine-wide token must not leak in.
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_ENABLE_HF_TRANSFER", False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(home / "no-token"))
    reset_sessions()
