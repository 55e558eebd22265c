"""A cluster of three implementations on loopback: node 1 is `tenure node`,
node 2 the C example (ffi/examples/udp_node.c against the C ABI's static
library), node 3 the Python example (examples/udp_node.py on the asyncio
driver). A leader is elected, killed, another is elected with a larger
token, and the Python node's state file reads back with `tenure state`.
Once with plain frames and any of the three leading first; once with a
cluster key, the Python node leading first (node 1 only votes, and the C
node starts after the election) and the C node after it.

Needs the release `tenure` binary and `libtenure_ffi.a` (`cargo build
--release -p tenure-cli -p tenure-ffi`; `$TENURE_BIN` overrides the binary)
and a C compiler (`$CC`, default `cc`). Without them the test is skipped
locally; under CI it fails instead."""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

from conftest import ROOT, Proc, deadline, free_port, release_dir


def missing(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI must run the mixed cluster)")
    pytest.skip(reason)


def tenure_bin() -> Path:
    bin = Path(os.environ.get("TENURE_BIN", release_dir() / "tenure"))
    if not bin.exists():
        missing(f"{bin} is missing: cargo build --release -p tenure-cli")
    return bin


def c_node(into: Path) -> Path:
    """Compiles the C example exactly as ffi/tests/udp_node.rs does."""
    lib = release_dir() / "libtenure_ffi.a"
    cc = os.environ.get("CC", "cc")
    if not lib.exists():
        missing(f"{lib} is missing: cargo build --release -p tenure-ffi")
    if shutil.which(cc) is None:
        missing(f"no C compiler ({cc})")
    out = into / "udp_node"
    ffi = ROOT / "ffi"
    subprocess.run(
        [cc, "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", str(ffi / "include"),
         str(ffi / "examples" / "udp_node.c"), str(lib), "-lpthread", "-ldl", "-lm", "-o", str(out)],
        check=True,
        timeout=120,
    )
    return out


def node_file(d: Path, id: int, ports: List[Tuple[int, int]], top: str) -> Path:
    """A `tenure node` file for `id` of cluster 9 naming the others."""
    me = dict(ports)[id]
    text = (
        f'id = {id}\ncluster_id = 9\nlisten = "127.0.0.1:{me}"\ndata_dir = "{d / f"data-{id}"}"\n'
        f"heartbeat_ms = 50\ndeath_timeout_ms = 300\n{top}\n"
    )
    for peer, port in ports:
        if peer != id:
            text += f'[[peers]]\nid = {peer}\naddr = "127.0.0.1:{port}"\n'
    path = d / f"node-{id}.toml"
    path.write_text(text)
    return path


def next_leader(nodes: Dict[int, Proc], dead: Optional[int] = None) -> Tuple[int, int]:
    """The token `(term, leader)` of the first became_leader among the live
    nodes within 10 s."""
    end = deadline(10)
    while time.monotonic() < end:
        for id, p in nodes.items():
            if id == dead:
                continue
            for line in p.poll():
                token = line.get("event", {}).get("became_leader", {}).get("token")
                if token:
                    return token["term"], token["leader"]
        time.sleep(0.005)
    raise AssertionError(f"no leader within 10 s: {[p.seen for p in nodes.values()]}")


def learns_leader(p: Proc, term: int, leader: int) -> bool:
    end = deadline(5)
    while time.monotonic() < end:
        p.poll()
        for line in p.seen:
            changed = line.get("event", {}).get("leader_changed", {})
            if changed.get("term") == term and changed.get("leader") == leader:
                return True
        time.sleep(0.005)
    return False


@pytest.mark.parametrize("keyed", [False, True], ids=["plain-any-leads", "keyed-python-leads"])
def test_mixed_cluster_of_rust_c_and_python_nodes_elects_and_tokens_grow_after_the_leader_dies(
    tmp_path: Path, procs: List[Proc], keyed: bool
) -> None:
    bin = tenure_bin()
    c_example = c_node(tmp_path)
    env = dict(os.environ)
    top = ""
    if keyed:
        key = tmp_path / "cluster.key"
        subprocess.run([str(bin), "keygen", str(key)], check=True, timeout=30, capture_output=True)
        top = f'key_file = "{key}"\nmode = "voter"'
        env["TENURE_KEY_FILE"] = str(key)
    ports = [(i, free_port()) for i in (1, 2, 3)]
    files = {i: node_file(tmp_path, i, ports, top) for i in (1, 2, 3)}

    def args(id: int) -> List[str]:
        return [str(id), "9", f"127.0.0.1:{dict(ports)[id]}", str(tmp_path / f"data-{id}"), "50", "300"] + [
            f"{peer}=127.0.0.1:{port}" for peer, port in ports if peer != id
        ]

    example = Path(__file__).resolve().parents[1] / "examples" / "udp_node.py"
    nodes = {
        1: Proc([str(bin), "node", "--config", str(files[1])]),
        3: Proc([sys.executable, str(example)] + args(3), env=env),
    }
    procs += nodes.values()
    token0 = None
    if keyed:
        # Node 1 only votes: with it, the Python node is a quorum's only
        # candidate. The C node joins the leader's cluster.
        token0 = next_leader(nodes)
        assert token0[1] == 3, f"the Python node leads first: {token0}"
    nodes[2] = Proc([str(c_example)] + args(2), env=env)
    procs.append(nodes[2])
    token1 = token0 or next_leader(nodes)
    first = token1[1]
    nodes[first].kill()
    token2 = next_leader(nodes, dead=first)
    assert token2[1] != first
    assert token2 > token1, f"tokens grow: {token1} then {token2}"
    if first != 3:
        # The two left, one of them the Python node, are the only quorum:
        # it voted, and it knows the leader.
        assert token2[1] == 3 or learns_leader(nodes[3], *token2), nodes[3].seen
    python_term = token1[0] if first == 3 else token2[0]
    for p in procs:
        p.kill()
    shown = subprocess.run(
        [str(bin), "state", "--config", str(files[3])], capture_output=True, text=True, timeout=30
    )
    assert shown.returncode == 0, shown.stderr
    assert "owner node 3 of cluster 9" in shown.stdout, shown.stdout
    term = int(shown.stdout.split("term ")[1].split(",")[0])
    assert term >= python_term, f"the Python node stored term {term}, it saw {python_term}"


def state_shows(bin: Path, file: Path, text: str) -> str:
    """`tenure state` of a node file once it shows `text` (within 5 s)."""
    end = deadline(5)
    while True:
        shown = subprocess.run(
            [str(bin), "state", "--config", str(file)], capture_output=True, text=True, timeout=30
        ).stdout
        if text in shown or time.monotonic() > end:
            return shown
        time.sleep(0.05)


def test_mixed_cluster_python_node_follows_a_membership_change_made_with_tenure_ctl(
    tmp_path: Path, procs: List[Proc]
) -> None:
    """`tenure ctl add-voter 4` at a `tenure node` leader reaches the Python
    node: it stores the membership where `tenure state` reads it, takes
    part in the next election of the four voters (whose quorum needs it
    once a Rust node died), and restarts on the stored membership."""
    bin = tenure_bin()
    ports = [(i, free_port()) for i in (1, 2, 3, 4)]
    files = {i: node_file(tmp_path, i, ports[: max(3, i)], "") for i in (1, 2, 3, 4)}
    example = Path(__file__).resolve().parents[1] / "examples" / "udp_node.py"

    def python_node() -> Proc:
        return Proc([sys.executable, str(example), "3", "9", f"127.0.0.1:{ports[2][1]}",
                     str(tmp_path / "data-3"), "50", "300"]
                    + [f"{peer}=127.0.0.1:{port}" for peer, port in ports[:2]])

    nodes = {i: Proc([str(bin), "node", "--config", str(files[i])]) for i in (1, 2)}
    nodes[3] = python_node()
    procs += nodes.values()
    term, leader = next_leader(nodes)
    while leader == 3:
        # `tenure ctl` needs a Rust leader: the Python node has no admin socket.
        nodes[3].kill()
        term, leader = next_leader(nodes, dead=3)
        nodes[3] = python_node()
        procs.append(nodes[3])
    nodes[4] = Proc([str(bin), "node", "--config", str(files[4]), "--join"])
    procs.append(nodes[4])
    added = subprocess.run(
        [str(bin), "ctl", "--json", "--wait-ms", "8000", "--config", str(files[leader]),
         "add-voter", "4", f"127.0.0.1:{ports[3][1]}"],
        capture_output=True, text=True, timeout=30,
    )
    assert added.returncode == 0, added.stdout + added.stderr
    shown = state_shows(bin, files[3], "voters [1, 2, 3, 4]")
    assert "voters [1, 2, 3, 4]" in shown, shown

    # Three of four are a quorum: with the Rust leader dead, the Python
    # node's vote (or campaign) is needed.
    nodes[leader].kill()
    token2 = next_leader(nodes, dead=leader)
    assert token2 > (term, leader) and token2[1] != leader
    # Restarted, the Python node reads its stored membership and follows.
    if token2[1] != 3:
        nodes[3].kill()
        nodes[3] = python_node()
        procs.append(nodes[3])
        assert learns_leader(nodes[3], *token2), nodes[3].seen
