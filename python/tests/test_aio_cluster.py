"""Three asyncio nodes in one process, on loopback UDP with their state
files: election, leases, `leadership()` cancellation, transfer, and the
hand-over of `close()`. Every test is bounded by `wait_for`."""

import asyncio
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, Dict, List, Optional, Set, Tuple, TypeVar

import pytest

import tenure
import tenure.aio
from conftest import free_port

T = TypeVar("T")


def run(test: Callable[[], Awaitable[T]], seconds: float = 30) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(test(), seconds)

    return asyncio.run(bounded())


async def start_cluster(tmp_path: Path) -> List[tenure.aio.AioNode]:
    ports = {i: free_port() for i in (1, 2, 3)}
    nodes = []
    for i, port in ports.items():
        config = tenure.Config(
            i,
            list(ports),
            peers={j: f"127.0.0.1:{p}" for j, p in ports.items() if j != i},
            cluster_id=9,
            heartbeat_ms=50,
            death_timeout_ms=1000,
            fencing="strict",
            data_dir=str(tmp_path / f"data-{i}"),
        )
        nodes.append(await tenure.aio.start(config, ("127.0.0.1", port)))
    return nodes


async def until(check: Callable[[], bool], what: str, seconds: float = 10) -> None:
    end = asyncio.get_running_loop().time() + seconds
    while not check():
        if asyncio.get_running_loop().time() > end:
            raise AssertionError(f"not within {seconds} s: {what}")
        await asyncio.sleep(0.01)


async def one_leader(nodes: List[tenure.aio.AioNode]) -> tenure.aio.AioNode:
    """The single leader every running node knows."""

    def agreed() -> bool:
        leaders = [n for n in nodes if n.is_leader]
        return len(leaders) == 1 and all(n.leader == leaders[0].id for n in nodes)

    await until(agreed, "one leader that every node knows")
    return next(n for n in nodes if n.is_leader)


async def change(leader: tenure.aio.AioNode, input: tenure.Input) -> int:
    """`leader.change_membership(input)`, asked again while it is refused
    with no_quorum (the leader has not heard the new voters lately)."""
    for _ in range(20):
        try:
            return await leader.change_membership(input)
        except tenure.aio.MembershipChangeFailed as e:
            if e.reason != "no_quorum":
                raise
            await asyncio.sleep(0.05)
    return await leader.change_membership(input)


Body = Callable[[List[tenure.aio.AioNode], tenure.aio.AioNode], Awaitable[None]]


def cluster_test(tmp_path: Path, body: Body) -> None:
    """Runs `body(nodes, leader)` on a fresh cluster once it has a leader;
    stops every node after."""

    async def test() -> None:
        nodes = await start_cluster(tmp_path)
        try:
            leader = await one_leader(nodes)
            # A few heartbeat rounds: the leader hears every follower since
            # it won (a change of voters is refused, no_quorum, before it
            # heard a majority of the new voters).
            await asyncio.sleep(0.2)
            await body(nodes, leader)
        finally:
            for n in nodes:
                await n.close(hand_over=False)

    run(test)


def test_aio_three_nodes_elect_one_leader_whose_lease_and_state_files_agree(tmp_path: Path) -> None:
    leases: List[tenure.Lease] = []

    async def body(nodes: List[tenure.aio.AioNode], leader: tenure.aio.AioNode) -> None:
        lease = await leader.lease()
        leases.append(lease)
        assert lease.token == leader.token and lease.token.leader == leader.id
        assert lease.valid_until_ns > tenure.aio.clock_ns()
        follower = next(n for n in nodes if n is not leader)
        seen: List[tenure.Event] = []

        async def watch() -> None:
            async for event in follower.events():
                seen.append(event)

        watcher = asyncio.ensure_future(watch())
        await leader.transfer(follower.id)
        await until(
            lambda: any(e.kind == tenure.EventKind.BECAME_LEADER for e in seen), "events reach iterators"
        )
        await follower.close()
        await asyncio.wait_for(watcher, 5)  # iterators end when their node stops

    cluster_test(tmp_path, body)
    for i in (1, 2, 3):
        record = (tmp_path / f"data-{i}" / "tenure.state").read_bytes()
        state, owner = tenure.decode_state(record)
        assert owner == (i, 9) and state.term >= leases[0].token.term


def test_aio_leadership_block_is_cancelled_before_the_lease_ends_when_the_leader_is_cut_off(
    tmp_path: Path,
) -> None:
    async def body(nodes: List[tenure.aio.AioNode], leader: tenure.aio.AioNode) -> None:
        entered = asyncio.Event()
        last: List[Optional[tenure.Lease]] = [None]
        lost_at: List[int] = []

        async def work() -> None:
            try:
                async with leader.leadership():
                    entered.set()
                    while True:
                        last[0] = leader.current_lease() or last[0]
                        await asyncio.sleep(0.005)
            except tenure.aio.LeadershipLost:
                lost_at.append(tenure.aio.clock_ns())

        task = asyncio.ensure_future(work())
        await entered.wait()
        await asyncio.sleep(0.2)  # renewed leases keep the block running
        assert not task.done()
        for follower in nodes:
            if follower is not leader:
                await follower.close(hand_over=False)
        await asyncio.wait_for(task, 5)
        held = last[0]
        assert held is not None and lost_at, "the block ran and was cancelled"
        assert lost_at[0] < held.valid_until_ns, (
            f"cancelled {(lost_at[0] - held.valid_until_ns) / 1e6:.1f} ms after the lease ended"
        )

    cluster_test(tmp_path, body)


def test_aio_leadership_block_is_cancelled_when_the_leader_demotes(tmp_path: Path) -> None:
    async def body(nodes: List[tenure.aio.AioNode], leader: tenure.aio.AioNode) -> None:
        entered = asyncio.Event()

        async def work() -> str:
            try:
                async with leader.leadership():
                    entered.set()
                    await asyncio.sleep(60)
            except tenure.aio.LeadershipLost as e:
                # No cancellation is left pending on the task.
                await asyncio.sleep(0.01)
                return str(e)
            return "the block ended by itself"

        task = asyncio.ensure_future(work())
        await entered.wait()
        leader.demote()
        why = await asyncio.wait_for(task, 2)
        assert "stepped down" in why and not leader.is_leader

    cluster_test(tmp_path, body)


def test_aio_transfer_hands_leadership_to_the_named_node_and_close_hands_it_over(
    tmp_path: Path,
) -> None:
    async def body(nodes: List[tenure.aio.AioNode], leader: tenure.aio.AioNode) -> None:
        with pytest.raises(tenure.aio.TransferFailed) as failed:
            await leader.transfer(leader.id)
        assert failed.value.reason == "target_is_self"
        old = leader.token
        target = next(n for n in nodes if n is not leader)
        await leader.transfer(target.id)
        assert await one_leader(nodes) is target
        assert target.token is not None and old is not None and target.token > old
        # close() hands over first: the third node leads without waiting
        # out a death timeout.
        third = next(n for n in nodes if n is not leader and n is not target)
        reasons: List[Optional[str]] = []

        async def watch() -> None:
            async for event in target.events():
                if event.kind == tenure.EventKind.STEPPED_DOWN:
                    reasons.append(event.reason)

        watcher = asyncio.ensure_future(watch())
        await asyncio.sleep(0)
        await target.close()
        await asyncio.wait_for(watcher, 5)
        assert reasons == ["transferred"]
        await one_leader([leader, third])

    cluster_test(tmp_path, body)


def test_log_up_to_date_an_asyncio_node_started_behind_never_leads(tmp_path: Path) -> None:
    """Positions given to `start()` hold before any datagram: the node
    behind is refused by the two ahead, however often it campaigns; a
    positioned node started without one is refused."""

    async def test() -> None:
        ports = {i: free_port() for i in (1, 2, 3)}
        configs = {
            i: tenure.Config(
                i,
                list(ports),
                peers={j: f"127.0.0.1:{p}" for j, p in ports.items() if j != i},
                cluster_id=9,
                heartbeat_ms=50,
                death_timeout_ms=1000,
                log_positions=True,
                data_dir=str(tmp_path / f"data-{i}"),
            )
            for i in ports
        }
        with pytest.raises(ValueError, match="log_position="):
            await tenure.aio.start(configs[1], ("127.0.0.1", ports[1]))
        nodes = [
            await tenure.aio.start(configs[i], ("127.0.0.1", ports[i]), log_position=position)
            for i, position in ((1, 5), (2, 10), (3, 10))
        ]
        try:
            for _ in range(3):
                nodes[0].promote()
                leader = await one_leader(nodes)
                assert leader.id != 1, "the node behind leads"
                leader.demote()
                await asyncio.sleep(0.05)
        finally:
            for n in nodes:
                await n.close(hand_over=False)

    run(test)


def test_aio_log_position_needs_log_positions(tmp_path: Path) -> None:
    async def body(nodes: List[tenure.aio.AioNode], leader: tenure.aio.AioNode) -> None:
        with pytest.raises(ValueError, match="log_positions"):
            leader.log_position(3)
        assert leader.is_leader  # nothing was fed

    cluster_test(tmp_path, body)


def test_aio_lease_needs_strict_fencing(tmp_path: Path) -> None:
    async def test() -> None:
        config = tenure.Config(1, [1], data_dir=str(tmp_path / "d"))
        node = await tenure.aio.start(config, ("127.0.0.1", free_port()))
        try:
            with pytest.raises(ValueError, match="strict"):
                await node.lease()
        finally:
            await node.close()
        with pytest.raises(tenure.aio.NodeStopped):
            node.promote()

    run(test)


def test_aio_membership_change_reaches_every_member_and_a_restarted_node_keeps_it(
    tmp_path: Path,
) -> None:
    """A voter removed at the leader: the others store the new membership
    (`tenure.membership`), act on it, and one restarted from its data
    directory starts on it rather than on its configured voters."""

    async def body(nodes: List[tenure.aio.AioNode], leader: tenure.aio.AioNode) -> None:
        removed = next(n for n in nodes if n is not leader)
        kept = next(n for n in nodes if n is not leader and n is not removed)
        left = sorted([leader.id, kept.id])
        epoch = await change(leader, tenure.Input.remove_member(removed.id))
        assert epoch > 0
        await until(lambda: kept.status().voters == left, "the follower acts on the change")
        assert leader.status().membership == kept.status().membership
        assert (tmp_path / f"data-{kept.id}" / "tenure.membership").exists()
        config, listen = kept.config, kept.listen
        await kept.close(hand_over=False)
        nodes.remove(kept)
        again = await tenure.aio.start(config, listen)
        nodes.append(again)
        assert again.status().voters == left
        assert again.status().membership.epoch == epoch
        with pytest.raises(ValueError, match="not a membership change"):
            await leader.change_membership(tenure.Input.tick())

    cluster_test(tmp_path, body)


class Recorder:
    """Wraps a node's state file and socket to log, in one order, when each
    state or membership write starts and ends and when each datagram
    leaves; writes take `write_s` seconds after the real (durable) write (a
    membership write before it, and it raises if `fail_membership`)."""

    def __init__(self, node: tenure.aio.AioNode, log: List[Tuple[int, str]], write_s: float) -> None:
        self.node, self.log, self.write_s = node, log, write_s
        self.file, self.transport = node._state_file, node._transport
        self.lock = threading.Lock()
        self.writing = asyncio.Event()
        self.loop = asyncio.get_running_loop()
        self.fail_membership = False
        node._state_file, node._transport = self, self  # type: ignore[assignment]

    def note(self, what: str) -> None:
        with self.lock:
            self.log.append((self.node.id, what))

    def save(self, state: tenure.HardState) -> None:
        self.note("write")
        self.loop.call_soon_threadsafe(self.writing.set)
        self.file.save(state)
        time.sleep(self.write_s)
        self.note("durable")

    def save_membership(self, record: bytes) -> None:
        self.note("write")
        self.loop.call_soon_threadsafe(self.writing.set)
        time.sleep(self.write_s)
        if self.fail_membership:
            raise tenure.StateError("membership write failed (simulated)")
        self.file.save_membership(record)
        self.note("durable")

    def close(self) -> None:
        self.note("closed")
        if self.transport is not None:
            self.transport.close()
        self.file.close()

    def is_closing(self) -> bool:
        assert self.transport is not None
        return self.transport.is_closing()

    def sendto(self, data: bytes, addr: Tuple[str, int]) -> None:
        self.note("send")
        assert self.transport is not None
        self.transport.sendto(data, addr)


def sends_after_close(log: List[Tuple[int, str]], node: int) -> int:
    """How many datagrams `node` sent after its socket or state file was
    first closed (0 if it never closed)."""
    closed = [i for i, entry in enumerate(log) if entry == (node, "closed")]
    if not closed:
        return 0
    return sum(1 for entry in log[closed[0] :] if entry == (node, "send"))


def sends_during_writes(log: List[Tuple[int, str]]) -> List[Tuple[int, int]]:
    """(node, index) of every datagram a node sent while its own state
    write was in flight."""
    writing: Set[int] = set()
    bad = []
    for i, (node, what) in enumerate(log):
        if what == "write":
            writing.add(node)
        elif what in ("durable", "closed"):
            writing.discard(node)
        elif what == "send" and node in writing:
            bad.append((node, i))
    return bad


def test_aio_persist_before_send_no_datagram_leaves_while_a_state_write_is_in_flight(
    tmp_path: Path,
) -> None:
    log: List[Tuple[int, str]] = []

    async def body(nodes: List[tenure.aio.AioNode], leader: tenure.aio.AioNode) -> None:
        recorders = [Recorder(n, log, 0.03) for n in nodes]
        # Elections under slow writes: votes and campaigns arrive while
        # writes are in flight, and a second write queues behind the first.
        for _ in range(3):
            leader.demote()
            leader = await one_leader(nodes)
        # close() while a write is in flight finishes it, sends nothing after.
        follower = next(n for n in nodes if n is not leader)
        recorder = recorders[nodes.index(follower)]
        recorder.writing.clear()
        leader.demote()
        await asyncio.wait_for(recorder.writing.wait(), 5)
        await follower.close(hand_over=False)
        assert (follower.id, "closed") in log, log[-5:]
        assert sends_after_close(log, follower.id) == 0, log[-5:]

    cluster_test(tmp_path, body)
    assert sum(1 for _, what in log if what == "durable") >= 6, log
    assert sends_during_writes(log) == [], log


def test_aio_close_cancelled_during_a_write_raises_and_stops_the_node(tmp_path: Path) -> None:
    async def body(nodes: List[tenure.aio.AioNode], leader: tenure.aio.AioNode) -> None:
        log: List[Tuple[int, str]] = []
        follower = next(n for n in nodes if n is not leader)
        recorder = Recorder(follower, log, 0.5)
        leader.demote()
        await asyncio.wait_for(recorder.writing.wait(), 5)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(follower.close(hand_over=False), 0.05)
        # Stopped all the same: nothing is sent after, and the state file
        # is released once the write in flight ends.
        with pytest.raises(tenure.aio.NodeStopped):
            follower.promote()
        await asyncio.sleep(0.6)
        assert (follower.id, "closed") in log and sends_during_writes(log) == [], log
        assert sends_after_close(log, follower.id) == 0, log[-5:]
        tenure.StateFile(str(tmp_path / f"data-{follower.id}"), follower.id, 9).close()

    cluster_test(tmp_path, body)


def test_aio_start_refuses_a_member_without_an_address(tmp_path: Path) -> None:
    async def test() -> None:
        # Voter 3 and observer 4 have no address: the node could never
        # reach them, so start() says so instead of running deaf to them.
        config = tenure.Config(
            1, [1, 2, 3], observers=[4], peers={2: "127.0.0.1:7002"},
            data_dir=str(tmp_path / "d"),
        )
        with pytest.raises(tenure.ConfigError, match="no address for member 3, 4") as raised:
            await tenure.aio.start(config, ("127.0.0.1", free_port()))
        assert raised.value.setting == "peers"
        assert not (tmp_path / "d").exists(), "refused before the state file is made"

    run(test)


def test_aio_leadership_lost_at_the_same_time_as_an_outer_cancel_lets_the_cancel_through(
    tmp_path: Path,
) -> None:
    async def body(nodes: List[tenure.aio.AioNode], leader: tenure.aio.AioNode) -> None:
        entered = asyncio.Event()
        lost: List[str] = []

        async def work() -> None:
            # The loop the documentation shows: lead again after each loss.
            while True:
                try:
                    async with leader.leadership():
                        entered.set()
                        await asyncio.sleep(60)
                except tenure.aio.LeadershipLost as e:
                    lost.append(str(e))

        task = asyncio.ensure_future(work())
        await entered.wait()
        # The demotion's step-down cancels the block; the caller's cancel
        # lands before the task runs again.
        leader.demote()
        asyncio.get_running_loop().call_soon(task.cancel)
        done, _ = await asyncio.wait([task], timeout=2)
        assert done, f"the task ignored its cancellation (lost: {lost})"
        assert task.cancelled()

    cluster_test(tmp_path, body)


def test_aio_commands_from_another_thread_raise_instead_of_racing_the_loop(tmp_path: Path) -> None:
    async def body(nodes: List[tenure.aio.AioNode], leader: tenure.aio.AioNode) -> None:
        follower = next(n for n in nodes if n is not leader)
        raised: List[BaseException] = []

        def elsewhere() -> None:
            for command in (follower.promote, follower.demote, lambda: follower.node.status()):
                try:
                    command()
                except RuntimeError as e:
                    raised.append(e)

        thread = threading.Thread(target=elsewhere)
        thread.start()
        await asyncio.get_running_loop().run_in_executor(None, thread.join, 5)
        assert [str(e) for e in raised] == [
            f"node {follower.id}: call the driver from its event loop's thread "
            "(loop.call_soon_threadsafe)"
        ] * 2
        assert follower.status().term == leader.status().term

    cluster_test(tmp_path, body)


def test_aio_leadership_block_never_resumes_without_a_lease_after_the_loop_stalls(
    tmp_path: Path,
) -> None:
    async def body(nodes: List[tenure.aio.AioNode], leader: tenure.aio.AioNode) -> None:
        entered = asyncio.Event()
        held: List[bool] = []
        lost: List[str] = []

        async def work() -> None:
            try:
                async with leader.leadership():
                    entered.set()
                    while True:
                        held.append(leader.current_lease() is not None)
                        await asyncio.sleep(0.002)
            except tenure.aio.LeadershipLost as e:
                lost.append(str(e))

        task = asyncio.ensure_future(work())
        await entered.wait()
        await asyncio.sleep(0.1)
        # A blocking callback holds the loop past the lease (1 s death
        # timeout): no heartbeat goes out, every timer is late at once.
        asyncio.get_running_loop().call_soon(time.sleep, 1.5)
        await asyncio.wait_for(task, 5)
        assert lost and len(held) > 10, (lost, len(held))
        assert all(held), f"the block ran {held.count(False)} times without a lease"

    cluster_test(tmp_path, body)


def test_aio_hostile_datagrams_never_raise_into_the_loop_and_the_node_runs_on(tmp_path: Path) -> None:
    async def body(nodes: List[tenure.aio.AioNode], leader: tenure.aio.AioNode) -> None:
        loop = asyncio.get_running_loop()
        errors: List[Dict[str, Any]] = []
        loop.set_exception_handler(lambda _, context: errors.append(context))
        target = next(n for n in nodes if n is not leader)
        assert target._transport is not None
        addr = target._transport.get_extra_info("sockname")
        frame: List[bytes] = []
        leader_transport = leader._transport
        assert leader_transport is not None
        transport = leader_transport

        class Tap:
            def __getattr__(self, name: str) -> Any:
                return getattr(transport, name)

            def sendto(self, data: bytes, to: Tuple[str, int]) -> None:
                if to == addr:
                    frame.append(data)
                transport.sendto(data, to)

        leader._transport = Tap()  # type: ignore[assignment]
        await until(lambda: bool(frame), "a heartbeat to the target")
        term = target.status().term
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind(("127.0.0.1", 0))
            # Garbage, empty (a wake-up, not counted), the largest UDP
            # payload, a truncated frame, and a real frame from an address
            # no peer has (a spoofed id).
            for data in (b"\x00", b"", os.urandom(65507), frame[0][:9], frame[0] * 2, frame[0]):
                s.sendto(data, addr)
        await until(lambda: sum(target.node.drops().values()) >= 5, "five datagrams dropped", 2)
        await asyncio.sleep(0.2)
        drops = target.node.drops()
        assert (drops["malformed"], drops["unknown_sender"]) == (4, 1), drops
        assert errors == [] and target._runner is not None and not target._runner.done()
        assert target.status().term == term and target.leader == leader.id

    cluster_test(tmp_path, body)


def test_aio_start_refuses_a_damaged_foreign_or_held_state_and_leaves_the_directory_free(
    tmp_path: Path,
) -> None:
    async def test() -> None:
        data = tmp_path / "d"
        config = tenure.Config(1, [1], cluster_id=9, fencing="strict", data_dir=str(data))
        node = await tenure.aio.start(config, ("127.0.0.1", free_port()))
        await node.lease()
        # Held by a running node.
        with pytest.raises(tenure.StateError, match="lock"):
            await tenure.aio.start(config, ("127.0.0.1", free_port()))
        await node.close()
        record = (data / "tenure.state").read_bytes()
        # A port in use releases the directory.
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
            taken.bind(("127.0.0.1", 0))
            with pytest.raises(OSError):
                await tenure.aio.start(config, taken.getsockname())
        # Another node's, then a damaged record: refused, left as it was.
        other = tenure.Config(2, [2], cluster_id=9, data_dir=str(data))
        with pytest.raises(tenure.StateError, match="node 1 of cluster 9"):
            await tenure.aio.start(other, ("127.0.0.1", free_port()))
        (data / "tenure.state").write_bytes(record[:-1] + bytes([record[-1] ^ 1]))
        with pytest.raises(tenure.StateError):
            await tenure.aio.start(config, ("127.0.0.1", free_port()))
        (data / "tenure.state").write_bytes(record)
        again = await tenure.aio.start(config, ("127.0.0.1", free_port()))
        try:
            lease = await again.lease()
            state, _ = tenure.decode_state(record)
            assert lease.token.term > state.term
        finally:
            await again.close()

    run(test)


def test_aio_change_membership_concurrent_calls_each_get_their_own_outcome(tmp_path: Path) -> None:
    """Two changes asked at once: the engine refuses the second (one change
    at a time); that refusal is the second caller's, and the first still
    returns the epoch its change reached."""

    async def body(nodes: List[tenure.aio.AioNode], leader: tenure.aio.AioNode) -> None:
        removed = next(n for n in nodes if n is not leader)
        first = asyncio.ensure_future(leader.change_membership(tenure.Input.remove_member(removed.id)))
        second = asyncio.ensure_future(
            leader.change_membership(tenure.Input.add_observer(5, f"127.0.0.1:{free_port()}"))
        )
        outcomes = await asyncio.gather(first, second, return_exceptions=True)
        assert isinstance(outcomes[0], int) and outcomes[0] > 0, outcomes
        assert isinstance(outcomes[1], tenure.aio.MembershipChangeFailed), outcomes
        assert outcomes[1].reason == "change_in_progress", outcomes
        assert removed.id not in leader.status().voters

    cluster_test(tmp_path, body)


def test_aio_membership_durable_before_use_nothing_is_sent_or_acted_on_while_its_write_is_in_flight(
    tmp_path: Path,
) -> None:
    log: List[Tuple[int, str]] = []

    async def body(nodes: List[tenure.aio.AioNode], leader: tenure.aio.AioNode) -> None:
        old = leader.status().membership
        recorders = [Recorder(n, log, 0.2) for n in nodes]
        removed = next(n for n in nodes if n is not leader)
        kept = next(n for n in nodes if n is not leader and n is not removed)
        recorder = recorders[nodes.index(kept)]
        changing = asyncio.ensure_future(change(leader, tenure.Input.remove_member(removed.id)))
        await asyncio.wait_for(recorder.writing.wait(), 5)
        assert kept.status().membership == old, "acts on a membership not yet durable"
        epoch = await changing
        await until(lambda: kept.status().membership.epoch == epoch, "the follower acts on it")

    cluster_test(tmp_path, body)
    assert sum(1 for _, what in log if what == "durable") >= 4, log
    assert sends_during_writes(log) == [], log


def test_aio_membership_write_that_fails_stops_the_node_and_a_restart_catches_up(tmp_path: Path) -> None:
    """A membership write that raises (a crash mid-change): the node stops
    on its old membership, sends nothing after, and restarted from its data
    directory it learns the change again."""
    log: List[Tuple[int, str]] = []

    async def body(nodes: List[tenure.aio.AioNode], leader: tenure.aio.AioNode) -> None:
        old = leader.status().membership
        removed = next(n for n in nodes if n is not leader)
        kept = next(n for n in nodes if n is not leader and n is not removed)
        config, listen = kept.config, kept.listen
        recorder = Recorder(kept, log, 0.05)
        recorder.fail_membership = True
        changing = asyncio.ensure_future(change(leader, tenure.Input.remove_member(removed.id)))
        await until(lambda: kept._stopped is not None, "the node stops on the failed write")
        with pytest.raises(tenure.aio.NodeStopped, match="simulated"):
            kept.promote()
        assert kept.status().membership == old
        assert (kept.id, "closed") in log and sends_during_writes(log) == [], log
        assert sends_after_close(log, kept.id) == 0, log
        assert not (tmp_path / f"data-{kept.id}" / "tenure.membership").exists()
        nodes.remove(kept)
        again = await tenure.aio.start(config, listen)
        nodes.append(again)
        assert again.status().membership == old
        epoch = await changing
        await until(lambda: again.status().membership.epoch == epoch, "the restarted node learns it")
        assert again.status().voters == sorted([leader.id, again.id])

    cluster_test(tmp_path, body)


def test_aio_close_during_a_membership_write_finishes_it_and_the_restart_is_on_it(tmp_path: Path) -> None:
    log: List[Tuple[int, str]] = []

    async def body(nodes: List[tenure.aio.AioNode], leader: tenure.aio.AioNode) -> None:
        removed = next(n for n in nodes if n is not leader)
        kept = next(n for n in nodes if n is not leader and n is not removed)
        config, listen = kept.config, kept.listen
        recorder = Recorder(kept, log, 0.3)
        changing = asyncio.ensure_future(change(leader, tenure.Input.remove_member(removed.id)))
        await asyncio.wait_for(recorder.writing.wait(), 5)
        await kept.close(hand_over=False)
        mine = [what for id, what in log if id == kept.id]
        assert "closed" in mine and "durable" in mine[: mine.index("closed")], mine
        assert sends_after_close(log, kept.id) == 0, mine
        assert sends_during_writes(log) == [], log
        nodes.remove(kept)
        again = await tenure.aio.start(config, listen)
        nodes.append(again)
        # The write closed on was the change's first (joint) membership.
        stored = again.status().membership
        assert stored.epoch > 0
        epoch = await changing
        left = sorted([leader.id, again.id])
        await until(lambda: again.status().voters == left, "the restarted node ends on the change")
        assert again.status().membership.epoch == epoch > stored.epoch

    cluster_test(tmp_path, body)
