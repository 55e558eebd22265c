"""Shared helpers: loopback ports, the release build's artifacts, and
processes whose JSON lines are read on a thread and that are killed on
teardown."""

import json
import os
import queue
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    """A UDP port the system just handed out (the Rust tests pick theirs
    the same way)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def release_dir() -> Path:
    """Where `cargo build --release` put the `tenure` binary and the C
    ABI's static library."""
    target = os.environ.get("CARGO_TARGET_DIR")
    return (Path(target) if target else ROOT / "target") / "release"


class Proc:
    """A child process; its stdout JSON lines arrive on a queue."""

    def __init__(self, args: List[str], env: Optional[Dict[str, str]] = None) -> None:
        self.args = args
        self.child = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=None, env=env, text=True
        )
        self.lines: "queue.Queue[Dict[str, Any]]" = queue.Queue()
        self.seen: List[Dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.child.stdout is not None
        for text in self.child.stdout:
            try:
                self.lines.put(json.loads(text))
            except ValueError:
                self.lines.put({"text": text})

    def poll(self) -> List[Dict[str, Any]]:
        """The lines new since the last call."""
        new = []
        while True:
            try:
                new.append(self.lines.get_nowait())
            except queue.Empty:
                break
        self.seen.extend(new)
        return new

    def kill(self) -> None:
        if self.child.poll() is None:
            self.child.kill()
        self.child.wait(timeout=10)


@pytest.fixture
def procs() -> Iterator[List[Proc]]:
    """Processes started by a test, all killed when it ends."""
    started: List[Proc] = []
    yield started
    for p in started:
        p.kill()


def deadline(seconds: float) -> float:
    return time.monotonic() + seconds
