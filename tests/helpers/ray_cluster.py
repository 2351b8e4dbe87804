"""A Ray cluster of several nodes on this one machine, for multi-node tests.

Each node is a ``ray start --block`` subprocess in its own session, with its own
``RLINF_NODE_RANK``, CPU count, object store, ports and temp dir. The head uses Ray 2.60's token
authentication with a random token passed through ``RAY_AUTH_TOKEN`` (nothing is written to
``~/.ray``); :attr:`LocalCluster.env` is what a client (``dexrl``) needs to attach. Nodes are
stopped by killing the processes of their own session, never with ``ray stop`` (which would end
every Ray instance on the machine, other people's included).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

RAY = str(Path(sys.executable).with_name("ray"))
NODE_CPUS = 4  # logical: RLinf's workers each ask for one; the machine has 2 real cores
OBJECT_STORE_BYTES = 200 * 2**20


def node_ip() -> str:
    """This machine's address as Ray itself picks it (what ``address="auto"`` would find)."""
    from ray._private.services import get_node_ip_address

    return get_node_ip_address()


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


@dataclass
class Node:
    """One ``ray start --block`` process and the session its Ray processes live in."""

    rank: int
    proc: subprocess.Popen[bytes]
    temp_dir: Path
    log: Path

    def processes(self) -> list[psutil.Process]:
        """Every live process of this node's session (``ray start``, raylet, workers, ...)."""
        found = []
        for p in psutil.process_iter():
            with contextlib.suppress(psutil.Error, ProcessLookupError, PermissionError):
                if os.getsid(p.pid) == self.proc.pid:
                    found.append(p)
        return found

    def raylet(self) -> psutil.Process:
        """This node's raylet process."""
        for p in self.processes():
            with contextlib.suppress(psutil.Error):
                if p.name() == "raylet":
                    return p
        raise RuntimeError(f"node {self.rank} has no raylet")

    def stop(self, timeout: float = 20.0) -> None:
        """Kill every process of this node's session and wait until they are gone."""
        procs = self.processes()
        for p in procs:
            with contextlib.suppress(psutil.Error):
                p.send_signal(signal.SIGKILL)
        psutil.wait_procs(procs, timeout=timeout)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=timeout)


@dataclass
class LocalCluster:
    """A head node (rank 0) and worker nodes, all on this machine.

    Attributes:
        address: The head's GCS address (``IP:PORT``).
        env: Environment variables a client needs (token authentication).
        nodes: The started nodes, head first.
    """

    root: Path
    ip: str = field(default_factory=lambda: node_ip())
    address: str = ""
    env: dict[str, str] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)

    @classmethod
    def start(cls, num_nodes: int = 2, *, extra_env: dict[str, str] | None = None,
              timeout: float = 120.0) -> LocalCluster:
        """Start a head and ``num_nodes - 1`` workers; wait until all are alive."""
        # Unix socket paths must stay under ~107 characters: a short root in /tmp.
        root = Path(tempfile.mkdtemp(prefix="dxrc-", dir="/tmp"))
        cluster = cls(root, env={"RAY_AUTH_MODE": "token",
                                 "RAY_AUTH_TOKEN": secrets.token_hex(32), **(extra_env or {})})
        try:
            cluster.address = f"{cluster.ip}:{free_port()}"
            cluster.add_node(0, timeout=timeout)
            for rank in range(1, num_nodes):
                cluster.add_node(rank, timeout=timeout)
        except BaseException:
            cluster.shutdown()
            raise
        return cluster

    def add_node(self, rank: int, *, timeout: float = 120.0) -> Node:
        """Start the node of ``RLINF_NODE_RANK=rank`` (0: the head) and wait until it joined."""
        temp_dir = self.root / f"n{rank}-{len(self.nodes)}"
        temp_dir.mkdir()
        log = temp_dir / "ray-start.log"
        cmd = [RAY, "start", "--block", "--disable-usage-stats", f"--num-cpus={NODE_CPUS}",
               "--num-gpus=0", f"--object-store-memory={OBJECT_STORE_BYTES}",
               f"--temp-dir={temp_dir}", f"--dashboard-agent-listen-port={free_port()}",
               f"--metrics-export-port={free_port()}", f"--node-ip-address={self.ip}"]
        if rank == 0:
            port = self.address.rpartition(":")[2]
            cmd += ["--head", f"--port={port}", "--include-dashboard=false",
                    f"--ray-client-server-port={free_port()}"]
        else:
            cmd += [f"--address={self.address}"]
        env = {**os.environ, **self.env, "RLINF_NODE_RANK": str(rank)}
        env.pop("RAY_ADDRESS", None)
        with open(log, "wb") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True)
        node = Node(rank, proc, temp_dir, log)
        self.nodes.append(node)
        self.wait_alive(len(self.alive_nodes()), timeout, node)
        return node

    def client_env(self) -> dict[str, str]:
        """``os.environ`` plus what a client needs to attach to this cluster."""
        return {**os.environ, **self.env}

    def alive_nodes(self) -> list[Node]:
        """The started nodes whose ``ray start`` still runs."""
        return [n for n in self.nodes if n.proc.poll() is None]

    def count_alive(self) -> int:
        """Alive nodes as the head's GCS reports them (a subprocess: no Ray in this process)."""
        code = (f"import ray; ray.init(address={self.address!r}, logging_level='ERROR', "
                "log_to_driver=False); print(sum(1 for n in ray.nodes() if n['Alive']))")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env=self.client_env(), timeout=120)
        if done.returncode != 0:
            return 0
        return int(done.stdout.strip().splitlines()[-1])

    def wait_alive(self, count: int, timeout: float, node: Node | None = None) -> None:
        """Wait until the GCS reports ``count`` alive nodes."""
        deadline = time.monotonic() + timeout
        while True:
            if node is not None and node.proc.poll() is not None:
                raise RuntimeError(f"ray start of node {node.rank} exited: "
                                   f"{node.log.read_text()[-2000:]}")
            if self.count_alive() >= count:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{count} Ray nodes not alive after {timeout:.0f} s")
            time.sleep(1.0)

    def shutdown(self) -> None:
        """Stop every node (workers first) and remove the temp dirs."""
        for node in reversed(self.nodes):
            node.stop()
        shutil.rmtree(self.root, ignore_errors=True)
