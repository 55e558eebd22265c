"""The cost of one `Node.step` through Python: a follower receives a plain
heartbeat frame from its leader and answers it (decode, engine step, the
acknowledgement framed, the actions made Python objects), the input of
`follower_heartbeat_framed` in ffi/benches/step.rs. Also the input's
construction, a tick with nothing due (the floor of a call), and the
timing loop's own Python, which every other line includes.

    python python/bench/step_cost.py        (after maturin develop --release)

Prints nanoseconds per step: the best of five timeit repeats.
"""

import sys
import timeit
from pathlib import Path
from typing import List

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import tenure  # noqa: E402
from memnet import Net, address, configs  # noqa: E402

FRAMES = 1024


def heartbeats(net: Net, leader: tenure.Node, to: int) -> List[bytes]:
    """The leader's next `FRAMES` heartbeats to node `to`, the cluster kept
    running meanwhile (acknowledgements delivered)."""
    src, dst = address(7000 + leader.id), address(7000 + to)
    frames: List[bytes] = []
    while len(frames) < FRAMES:
        due = leader.next_deadline_ns
        assert due is not None
        net.now = max(net.now, due)
        net.feed(src, tenure.Input.tick())
        frames += [data for s, data, d in net.flight if s == src and d == dst]
        net.deliver()
    return frames


def main() -> None:
    net = Net(configs(3))
    leader = net.elect()
    follower_id = next(n.id for n in net.nodes.values() if n is not leader)
    frames = heartbeats(net, leader, follower_id)
    config = next(c for c in configs(3) if c.id == follower_id)
    follower = tenure.Node(config, net.node(follower_id).status().persisted, net.now)
    source = address(7000 + leader.id)
    inputs = [tenure.Input.receive(f, source) for f in frames]
    assert follower.step(net.now, inputs[0]), "the follower answers a heartbeat"

    now = [net.now]
    i = [0]

    def heartbeat() -> None:
        i[0] += 1
        now[0] += 1000
        follower.step(now[0], inputs[i[0] % FRAMES])

    def heartbeat_with_input() -> None:
        i[0] += 1
        now[0] += 1000
        follower.step(now[0], tenure.Input.receive(frames[i[0] % FRAMES], source))

    def loop_alone() -> None:
        i[0] += 1
        now[0] += 1000
        inputs[i[0] % FRAMES]

    tick = tenure.Input.tick()
    idle = tenure.Node(tenure.Config(1, [1, 2, 3]), tenure.HardState(), 0)

    def nothing_due() -> None:
        idle.step(0, tick)

    n = 200_000
    for name, body in [
        ("follower heartbeat, frame in, ack out", heartbeat),
        ("the same, Input.receive built each time", heartbeat_with_input),
        ("tick with nothing due", nothing_due),
        ("the timing loop alone, no step", loop_alone),
    ]:
        best = min(timeit.repeat(body, number=n, repeat=5)) / n
        print(f"{name}: {best * 1e9:.0f} ns per step")


if __name__ == "__main__":
    main()
