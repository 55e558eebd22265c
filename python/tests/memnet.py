"""Synchronous `tenure.Node`s on an in-memory network: every datagram is
delivered at once, every persist is confirmed at once, and time jumps to
the next deadline. Used by the binding tests and the step benchmark."""

from typing import Dict, List, Optional, Set, Tuple

import tenure

Address = Tuple[str, int]


def address(port: int) -> Address:
    return ("127.0.0.1", port)


def configs(n: int, **settings: object) -> List[tenure.Config]:
    """Configs of nodes 1..n of cluster 9, node i at port 7000 + i (never
    bound: the network is in memory)."""
    ids = list(range(1, n + 1))
    return [
        tenure.Config(
            i,
            ids,
            peers={j: f"127.0.0.1:{7000 + j}" for j in ids if j != i},
            cluster_id=9,
            heartbeat_ms=50,
            death_timeout_ms=300,
            seed=i,
            **settings,  # type: ignore[arg-type]
        )
        for i in ids
    ]


class Net:
    """Nodes by address, a clock, the datagrams in flight and every event."""

    def __init__(self, configs: List[tenure.Config], positions: Optional[Dict[int, int]] = None) -> None:
        """`positions`: each positioned node's log position at start (0 if
        not given)."""
        self.now = 0
        at = positions or {}
        self.nodes: Dict[Address, tenure.Node] = {
            address(7000 + c.id): tenure.Node(
                c, tenure.HardState(), 0, at.get(c.id, 0) if c.log_positions else None
            )
            for c in configs
        }
        self.flight: List[Tuple[Address, bytes, Address]] = []
        self.events: List[tenure.Event] = []
        self.stored: Dict[int, tenure.HardState] = {}
        # The membership record each node stored last, and its id.
        self.memberships: Dict[int, Tuple[bytes, tenure.MembershipId]] = {}
        self.cut: Set[Address] = set()

    def node(self, id: int) -> tenure.Node:
        return self.nodes[address(7000 + id)]

    def feed(self, at: Address, input: tenure.Input) -> None:
        node = self.nodes[at]
        pending = [node.step(self.now, input)]
        while pending:
            for action in pending.pop(0):
                if action.kind == tenure.ActionKind.SEND:
                    assert action.addr is not None and action.data is not None
                    self.flight.append((at, action.data, action.addr))
                elif action.kind == tenure.ActionKind.PERSIST:
                    assert action.state is not None
                    self.stored[node.id] = action.state
                    pending.append(node.step(self.now, tenure.Input.persisted(action.state)))
                elif action.kind == tenure.ActionKind.PERSIST_MEMBERSHIP:
                    assert action.data is not None and action.membership is not None
                    self.memberships[node.id] = (action.data, action.membership)
                    done = tenure.Input.persisted_membership(action.membership)
                    pending.append(node.step(self.now, done))
                elif action.event is not None:
                    self.events.append(action.event)

    def deliver(self) -> None:
        while self.flight:
            src, data, dst = self.flight.pop(0)
            if dst in self.nodes and src not in self.cut and dst not in self.cut:
                self.feed(dst, tenure.Input.receive(data, src))

    def advance(self) -> None:
        """Delivers what is in flight, then ticks the earliest deadline."""
        self.deliver()
        due = [(n.next_deadline_ns, a) for a, n in self.nodes.items() if n.next_deadline_ns is not None]
        at_ns, at = min(due)
        self.now = max(self.now, at_ns)
        self.feed(at, tenure.Input.tick())
        self.deliver()

    def run(self, ns: int) -> None:
        """Advances until `ns` of time passed."""
        end = self.now + ns
        while self.now < end:
            self.advance()

    def leader(self) -> Optional[tenure.Node]:
        leaders = [n for a, n in self.nodes.items() if a not in self.cut and n.status().role == tenure.Role.LEADER]
        return leaders[0] if len(leaders) == 1 else None

    def elect(self, steps: int = 2000) -> tenure.Node:
        for _ in range(steps):
            self.advance()
            leader = self.leader()
            if leader is not None:
                return leader
        raise AssertionError(f"no leader after {steps} steps: {[n.status() for n in self.nodes.values()]}")
