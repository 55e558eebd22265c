"""An asyncio driver for `tenure.Node`.

    node = await tenure.aio.start(config, ("127.0.0.1", 7001))
    async with node.leadership() as lease:
        ...  # runs only while this node leads; cancelled before the lease ends
    await node.close()  # hands leadership over, then stops

One UDP socket (a `DatagramProtocol`), one timer (`loop.call_at` at the
node's next deadline), and one task that executes the node's actions in
order: a persist is written and fsynced in an executor thread, and the
actions after it (sends included) wait until it is durable; only then is
it acknowledged to the node. The engine's clock is `CLOCK_BOOTTIME` on
Linux (it counts suspend), else `time.monotonic_ns`.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import threading
import time
from typing import (
    TYPE_CHECKING,
    AsyncIterator,
    Callable,
    Deque,
    List,
    Optional,
    Set,
    Tuple,
    Union,
    cast,
)

from . import (
    Action,
    ActionKind,
    Config,
    ConfigError,
    Event,
    EventKind,
    HardState,
    Input,
    InputKind,
    Lease,
    Node,
    Role,
    StateFile,
    Status,
    Token,
)

if TYPE_CHECKING:
    Address = Union[str, Tuple[str, int]]

__all__ = [
    "AioNode",
    "LeadershipLost",
    "MembershipChangeFailed",
    "NodeStopped",
    "TransferFailed",
    "clock_ns",
    "start",
]

log = logging.getLogger("tenure.aio")

if hasattr(time, "CLOCK_BOOTTIME"):

    def clock_ns() -> int:
        """The engine's clock: monotonic, counting suspend."""
        return time.clock_gettime_ns(time.CLOCK_BOOTTIME)

else:  # pragma: no cover - not Linux

    def clock_ns() -> int:
        """The engine's clock: monotonic (this system has no CLOCK_BOOTTIME)."""
        return time.monotonic_ns()


class LeadershipLost(Exception):
    """The block of `leadership()` was cancelled: the node stopped leading,
    or its lease was about to end."""


class TransferFailed(Exception):
    """`transfer(to)` did not complete; `reason` says why."""

    def __init__(self, to: int, reason: Optional[str]) -> None:
        super().__init__(f"transfer to node {to} failed: {reason}")
        self.to = to
        self.reason = reason


class MembershipChangeFailed(Exception):
    """`change_membership()` did not complete; `reason` says why."""

    def __init__(self, reason: Optional[str]) -> None:
        super().__init__(f"membership change failed: {reason}")
        self.reason = reason


class NodeStopped(Exception):
    """The node was closed, or stopped because a state write failed."""


def _address(addr: Address) -> Tuple[str, int]:
    if isinstance(addr, str):
        host, sep, port = addr.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"listen address {addr!r} is not ip:port")
        return host.strip("[]"), int(port)
    return addr[0], addr[1]


async def start(
    config: Config,
    listen: Address,
    data_dir: Optional[Union[str, os.PathLike[str]]] = None,
    *,
    log_position: Optional[int] = None,
) -> AioNode:
    """Starts node `config.id` listening on `listen` (`"ip:port"` or
    `(host, port)`), with its state file in `data_dir` (default
    `config.data_dir`): the same directory layout as `tenure node`, locked
    while the node runs. A damaged state file raises `tenure.StateError`;
    a voter or observer without an address in `config.peers` raises
    `tenure.ConfigError` (`setting` `"peers"`). A node that stored a
    membership (after a change) restarts on it. A node made with
    `Config(log_positions=True)` needs `log_position`, its log's durable
    end, which it holds before it hears anyone (else it would grant votes
    as if its log were empty); other nodes take none."""
    loop = asyncio.get_running_loop()
    # Checked here too, before the state file is opened.
    if config.log_positions != (log_position is not None):
        raise ValueError(
            "log_position=<its log's durable end> goes with Config(log_positions=True), and only there"
        )
    # The node sends only to addresses in `peers`: a member without one
    # would never hear from it, silently.
    unreachable = [
        m for m in config.voters + config.observers if m != config.id and m not in config.peers
    ]
    if unreachable:
        err = ConfigError(
            f"peers: no address for member {', '.join(map(str, unreachable))}"
            " (every other voter and observer needs one)"
        )
        err.setting = "peers"
        raise err
    directory = data_dir if data_dir is not None else config.data_dir
    if directory is None:
        raise ValueError("start() needs data_dir (or Config(data_dir=...)) for the state file")
    state_file = await loop.run_in_executor(
        None, StateFile, os.fspath(directory), config.id, config.cluster_id
    )
    try:
        state = await loop.run_in_executor(None, state_file.load)
        membership = await loop.run_in_executor(None, state_file.load_membership)
        if membership is not None:
            config = config.with_membership(membership)
        node = AioNode(config, state_file, state, log_position)
        transport, _ = await loop.create_datagram_endpoint(
            lambda: _Protocol(node), local_addr=_address(listen)
        )
    except BaseException:
        state_file.close()
        raise
    node._started(transport)
    return node


class _Protocol(asyncio.DatagramProtocol):
    def __init__(self, node: AioNode) -> None:
        self._node = node

    def datagram_received(self, data: bytes, addr: Tuple[str, int]) -> None:
        self._node._feed(Input.receive(data, addr))

    def error_received(self, exc: Exception) -> None:
        # ICMP errors of a best-effort send (a peer that is down).
        log.debug("node %d: socket error: %s", self._node.id, exc)


class AioNode:
    """A node running on the event loop (made by `start()`). Use it from the
    loop's thread only."""

    def __init__(
        self,
        config: Config,
        state_file: StateFile,
        state: HardState,
        log_position: Optional[int] = None,
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._config = config
        self._state_file = state_file
        self._node = Node(config, state, clock_ns(), log_position)
        self._actions: Deque[Action] = collections.deque()
        # Actions ever queued and ever taken off the queue: an action's
        # sequence number ties an event to the command whose step made it.
        self._queued = 0
        self._dispatched = 0
        # Changes the engine accepted, oldest first, with the sequence
        # number of their step's first action; and the refusals that
        # `change_membership` already raised to their own caller.
        self._changes: Deque[Tuple[int, asyncio.Future[Event]]] = collections.deque()
        self._refusals: Set[int] = set()
        self._wake = asyncio.Event()
        self._transport: Optional[asyncio.DatagramTransport] = None
        self._timer: Optional[asyncio.TimerHandle] = None
        self._timer_at: Optional[int] = None
        self._runner: Optional[asyncio.Task[None]] = None
        self._queues: List[asyncio.Queue[Optional[Event]]] = []
        self._watches: List[Tuple[Callable[[Event], bool], asyncio.Future[Event]]] = []
        self._guards: Set[_Guard] = set()
        self._stopping = False
        self._stopped: Optional[BaseException] = None
        self._thread = threading.get_ident()

    # -- reading -----------------------------------------------------------

    @property
    def id(self) -> int:
        """This node's id."""
        return self._node.id

    @property
    def config(self) -> Config:
        """The configuration the node runs with (on its stored membership,
        if it had one at start)."""
        return self._config

    @property
    def listen(self) -> Tuple[str, int]:
        """The address the node's socket is bound to."""
        assert self._transport is not None, "bound by start()"
        host, port = self._transport.get_extra_info("sockname")[:2]
        return host, port

    @property
    def node(self) -> Node:
        """The engine node (for `status()`, `admits()`, `drops()`); feed
        it only through this driver."""
        return self._node

    @property
    def leader(self) -> Optional[int]:
        """The leader this node knows, if any."""
        return self._node.status().leader

    @property
    def is_leader(self) -> bool:
        """Whether this node leads."""
        return self._node.status().role == Role.LEADER

    def status(self) -> Status:
        """A snapshot of the node."""
        return self._node.status()

    @property
    def token(self) -> Optional[Token]:
        """The leadership's fencing token while this node leads."""
        return self._node.token

    def current_lease(self) -> Optional[Lease]:
        """The strict lease this node holds now, if any."""
        return self._node.lease(clock_ns())

    async def events(self) -> AsyncIterator[Event]:
        """Every event from the first iteration on, until the node stops.
        Each iterator has its own unbounded queue: keep reading it."""
        queue: asyncio.Queue[Optional[Event]] = asyncio.Queue()
        if self._stopped is not None:
            return
        self._queues.append(queue)
        try:
            while True:
                event = await queue.get()
                if event is None:
                    return
                yield event
        finally:
            self._queues.remove(queue)

    async def lease(self) -> Lease:
        """Waits until this node leads and holds a strict lease; returns it.
        Needs `fencing="strict"`: soft fencing grants no lease."""
        if not self._config.strict:
            raise ValueError('lease() needs Config(fencing="strict"): soft fencing grants no lease')
        while True:
            self._check_running()
            held = self._node.lease(clock_ns())
            if held is not None:
                return held
            await self._watch(
                lambda e: e.kind in (EventKind.LEASE_ACQUIRED, EventKind.BECAME_LEADER)
            )

    @contextlib.asynccontextmanager
    async def leadership(self, margin_ns: Optional[int] = None) -> AsyncIterator[Lease]:
        """Waits until this node leads with a strict lease, then runs the
        block; cancels it (raising `LeadershipLost` out of the `async with`)
        when the node steps down or loses its lease, and `margin_ns`
        (default half a heartbeat interval) before the lease would end
        unrenewed. The block must await often: cancellation lands only at
        an `await`."""
        margin = self._config.heartbeat_ns // 2 if margin_ns is None else margin_ns
        held = await self.lease()
        task = asyncio.current_task()
        assert task is not None, "leadership() runs in a task"
        cancelling = getattr(task, "cancelling", lambda: 0)()
        guard = _Guard(self, task, held, margin)
        try:
            yield held
        except asyncio.CancelledError:
            if not guard.why:
                raise
            # The cancellation was ours: end it here, as asyncio.timeout
            # does, unless someone else cancelled the task too (theirs goes
            # on, or a loop that leads again would never end).
            uncancel = getattr(task, "uncancel", None)
            if uncancel is not None and uncancel() > cancelling:
                raise
            raise LeadershipLost(guard.why) from None
        finally:
            guard.disarm()

    # -- commands ----------------------------------------------------------

    def promote(self) -> None:
        """Campaign now, for one term (modes candidate and manual)."""
        self._command(Input.promote())

    def log_position(self, position: int) -> None:
        """Reports that the application's log is durable up to `position`
        (a node made with `Config(log_positions=True)`; `ValueError`
        otherwise): votes go to the most up-to-date candidate."""
        self._command(Input.log_position(position))

    def demote(self) -> None:
        """Resign leadership; do not campaign for a death timeout."""
        self._command(Input.demote())

    async def transfer(self, to: int) -> None:
        """Hands leadership to `to`; returns once it leads, raises
        `TransferFailed` if the transfer failed."""
        done = self._watch(
            lambda e: e.kind in (EventKind.TRANSFER_COMPLETED, EventKind.TRANSFER_FAILED)
            and e.node == to
        )
        self._command(Input.transfer(to))
        event = await done
        if event.kind == EventKind.TRANSFER_FAILED:
            raise TransferFailed(to, event.reason)

    async def change_membership(self, change: Input) -> int:
        """Asks this node, the leader, for a membership change
        (`Input.add_voter(id, address)`, `add_observer`, `promote_observer`,
        `remove_member`, `replace_voter`); returns the epoch it reached, or
        raises `MembershipChangeFailed`. Refused at once, to this caller
        only: `"change_in_progress"` while another change runs (one at a
        time), and `"no_quorum"` for a change of voters while the leader
        has not heard a majority of the new voters lately, as just after it
        won (ask again a heartbeat later)."""
        if change.kind != InputKind.CHANGE_MEMBERSHIP:
            raise ValueError(f"{change!r} is not a membership change")
        self._check_thread()
        self._check_running()
        # A refusal (another change running, not the leader, ...) comes
        # from this change's own step, and is this caller's alone.
        start = self._queued
        for offset, action in enumerate(self._feed(change)):
            if action.event is not None and action.event.kind == EventKind.MEMBERSHIP_CHANGE_FAILED:
                self._refusals.add(start + offset)
                raise MembershipChangeFailed(action.event.reason)
        # Accepted: the engine runs one change at a time, so the next
        # outcome from this step on is this change's.
        done: asyncio.Future[Event] = self._loop.create_future()
        self._changes.append((start, done))
        event = await done
        if event.kind == EventKind.MEMBERSHIP_CHANGE_FAILED:
            raise MembershipChangeFailed(event.reason)
        return event.epoch or 0

    async def hand_over(self) -> None:
        """Hands leadership to the best voter (or resigns); returns once this
        node no longer leads. On a follower: the same as `demote()`."""
        if not self.is_leader:
            self._command(Input.hand_over())
            return
        done = self._watch(lambda e: e.kind == EventKind.STEPPED_DOWN)
        self._command(Input.hand_over())
        # The engine resigns within one election timeout if no one takes
        # over; the bound only guards against a stopped node.
        await asyncio.wait_for(done, timeout=3 * self._config.election_timeout_ns / 1e9 + 1)

    async def close(self, hand_over: bool = True) -> None:
        """Stops the node: hands leadership over first (unless `hand_over`
        is false), finishes the state write in flight, closes the socket and
        the state file. Event iterators end; waiters raise `NodeStopped`."""
        if self._stopped is not None:
            return
        try:
            if hand_over and self.is_leader:
                with contextlib.suppress(asyncio.TimeoutError, NodeStopped):
                    await self.hand_over()
            self._stopping = True
            self._wake.set()
            runner = self._runner
            if runner is not None:
                try:
                    # Shielded: a cancelled close() stops the node below
                    # and still raises; it does not end as if it were done.
                    await asyncio.shield(runner)
                except asyncio.CancelledError:
                    if not runner.cancelled():
                        raise
        finally:
            # A write still in flight ends before the state file closes
            # (its lock); nothing after it is sent.
            self._stop(NodeStopped(f"node {self.id} was closed"))

    async def __aenter__(self) -> AioNode:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- the loop ----------------------------------------------------------

    def _started(self, transport: asyncio.BaseTransport) -> None:
        # A datagram endpoint's transport (not always a DatagramTransport
        # subclass at run time).
        self._transport = cast(asyncio.DatagramTransport, transport)
        self._runner = self._loop.create_task(self._run())
        # The first step hands out the node's greetings to its peers;
        # ticking early is harmless.
        self._feed(Input.tick())

    def _check_running(self) -> None:
        if self._stopped is not None:
            raise NodeStopped(str(self._stopped)) from self._stopped

    def _check_thread(self) -> None:
        # From another thread, a step would race the loop's and its wake-up
        # and timer would not reach the loop.
        if threading.get_ident() != self._thread:
            raise RuntimeError(
                f"node {self.id}: call the driver from its event loop's thread "
                "(loop.call_soon_threadsafe)"
            )

    def _command(self, input: Input) -> None:
        self._check_thread()
        self._check_running()
        self._feed(input)

    def _feed(self, input: Input) -> List[Action]:
        if self._stopped is not None:
            return []
        actions = self._node.step(clock_ns(), input)
        if actions:
            self._actions.extend(actions)
            self._queued += len(actions)
            self._wake.set()
        self._arm()
        return actions

    def _arm(self) -> None:
        deadline = self._node.next_deadline_ns
        if deadline == self._timer_at and self._timer is not None:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_at = deadline
        if deadline is not None:
            delay = max(0, deadline - clock_ns()) / 1e9
            self._timer = self._loop.call_at(self._loop.time() + delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._feed(Input.tick())

    async def _run(self) -> None:
        try:
            while True:
                while self._actions:
                    action = self._actions.popleft()
                    seq = self._dispatched
                    self._dispatched += 1
                    if action.kind == ActionKind.SEND:
                        transport = self._transport
                        data, addr = action.data, action.addr
                        if transport is not None and not transport.is_closing() and data and addr:
                            transport.sendto(data, addr)
                    elif action.kind == ActionKind.PERSIST:
                        state = action.state
                        assert state is not None
                        await self._loop.run_in_executor(None, self._state_file.save, state)
                        self._feed(Input.persisted(state))
                    elif action.kind == ActionKind.PERSIST_MEMBERSHIP:
                        record, membership = action.data, action.membership
                        assert record is not None and membership is not None
                        await self._loop.run_in_executor(
                            None, self._state_file.save_membership, record
                        )
                        self._feed(Input.persisted_membership(membership))
                    elif action.kind == ActionKind.EVENT and action.event is not None:
                        self._event(action.event, seq)
                if self._stopping:
                    return
                self._wake.clear()
                await self._wake.wait()
        except asyncio.CancelledError:
            raise
        except Exception as e:
            # A state write that failed: the node must not act on it.
            log.error("node %d stops: %s", self.id, e)
            self._stop(e)

    def _event(self, event: Event, seq: int) -> None:
        for queue in self._queues:
            queue.put_nowait(event)
        if event.kind in (EventKind.MEMBERSHIP_CHANGE_COMPLETED, EventKind.MEMBERSHIP_CHANGE_FAILED):
            if seq in self._refusals:
                self._refusals.discard(seq)
            elif self._changes and self._changes[0][0] <= seq:
                _, change = self._changes.popleft()
                if not change.done():
                    change.set_result(event)
        for guard in list(self._guards):
            guard.on_event(event)
        watches, self._watches = self._watches, []
        for matches, future in watches:
            if future.done():
                continue
            if matches(event):
                future.set_result(event)
            else:
                self._watches.append((matches, future))

    def _watch(self, matches: Callable[[Event], bool]) -> asyncio.Future[Event]:
        self._check_thread()
        self._check_running()
        future: asyncio.Future[Event] = self._loop.create_future()
        self._watches.append((matches, future))
        return future

    def _stop(self, why: BaseException) -> None:
        if self._stopped is not None:
            return
        self._stopped = why
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._transport is not None:
            self._transport.close()
        current = asyncio.current_task()
        if self._runner is not None and self._runner is not current:
            self._runner.cancel()
        self._state_file.close()
        for queue in self._queues:
            queue.put_nowait(None)
        for guard in list(self._guards):
            guard.fire("the node stopped")
        futures = [f for _, f in self._watches] + [f for _, f in self._changes]
        for future in futures:
            if not future.done():
                future.set_exception(NodeStopped(str(why)))
        self._watches = []
        self._changes.clear()


class _Guard:
    """Cancels a `leadership()` block before its lease ends or when its node
    steps down."""

    def __init__(self, node: AioNode, task: asyncio.Task[object], lease: Lease, margin_ns: int):
        self._node = node
        self._task = task
        self._token = lease.token
        self._margin = margin_ns
        self._handle: Optional[asyncio.TimerHandle] = None
        self.why = ""
        node._guards.add(self)
        self._arm(lease.valid_until_ns)

    def _arm(self, valid_until_ns: int) -> None:
        if self._handle is not None:
            self._handle.cancel()
        delay = (valid_until_ns - self._margin - clock_ns()) / 1e9
        if delay <= 0:
            self.fire("the lease was about to end")
            return
        loop = self._node._loop
        self._handle = loop.call_at(loop.time() + delay, self._check)

    def _check(self) -> None:
        self._handle = None
        held = self._node._node.lease(clock_ns())
        if held is None or held.token != self._token:
            self.fire("the lease ended")
        else:
            # Renewed by the acknowledgements since: check again later.
            self._arm(held.valid_until_ns)

    def on_event(self, event: Event) -> None:
        if event.kind in (EventKind.STEPPED_DOWN, EventKind.LEASE_LOST):
            self.fire(f"node {self._node.id} stepped down ({event.reason or 'lease lost'})")
        elif event.kind == EventKind.LEASE_SHORTENED and event.valid_until_ns is not None:
            self._arm(event.valid_until_ns)

    def fire(self, why: str) -> None:
        if self.why:
            return
        self.why = why
        self.disarm()
        self._task.cancel()

    def disarm(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._node._guards.discard(self)
