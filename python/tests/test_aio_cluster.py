"""Three asyncio nodes in one process, on loopback UDP with their state
files: election, leases, `leadership()` cancellation, transfer, and the
hand-over of `close()`. Every test is bounded by `wait_for`."""

import asyncio
from pathlib import Path
from typing import Awaitable, Callable, List, Optional, TypeVar

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
            death_timeout_ms=300,
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


Body = Callable[[List[tenure.aio.AioNode], tenure.aio.AioNode], Awaitable[None]]


def cluster_test(tmp_path: Path, body: Body) -> None:
    """Runs `body(nodes, leader)` on a fresh cluster once it has a leader;
    stops every node after."""

    async def test() -> None:
        nodes = await start_cluster(tmp_path)
        try:
            await body(nodes, await one_leader(nodes))
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
        epoch = await leader.change_membership(tenure.Input.remove_member(removed.id))
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
