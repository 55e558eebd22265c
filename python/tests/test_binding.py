"""The binding on its own: configuration errors, the step/action cycle,
frames between nodes (plain and authenticated), hostile datagrams, and the
state file."""

import inspect
import os
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

import tenure
from memnet import Net, address, configs


@pytest.mark.parametrize(
    "settings, argument",
    [
        ({"heartbeat_ms": 500, "death_timeout_ms": 300}, "death_timeout_ms"),
        ({"heartbeat_ms": 0}, "heartbeat_ms"),
        ({"election_timeout_ms": 100, "election_jitter_ms": 200}, "election_jitter_ms"),
        ({"mode": "leader"}, "mode"),
        ({"fencing": "hard"}, "fencing"),
        ({"peers": {2: "localhost:7002"}}, "peers"),
        ({"peers": {0: "127.0.0.1:7002"}}, "peers"),
        ({"observers": [2]}, "observers"),
        ({"key_file": "/nonexistent/key", "data_dir": "/tmp"}, "key_file"),
        ({"key_file": "/nonexistent/key"}, "data_dir"),
        ({"clock_drift_ppm": 2_000_000}, "clock_drift_ppm"),
    ],
)
def test_config_errors_name_the_argument(settings: Dict[str, Any], argument: str) -> None:
    with pytest.raises(tenure.ConfigError) as raised:
        tenure.Config(1, [1, 2, 3], **settings)
    assert raised.value.setting == argument
    assert argument.split("_ms")[0] in str(raised.value)
    assert isinstance(raised.value, ValueError)


def test_config_errors_name_id_and_voters() -> None:
    with pytest.raises(tenure.ConfigError) as raised:
        tenure.Config(0, [1])
    assert raised.value.setting == "id"
    with pytest.raises(tenure.ConfigError) as raised:
        tenure.Config(1, [])
    assert raised.value.setting == "voters"


def test_config_signature_shows_real_defaults_and_observers_read_back() -> None:
    observers = inspect.signature(tenure.Config).parameters["observers"]
    assert observers.default is None
    config = tenure.Config(1, [1, 2], observers=[3])
    assert config.observers == [3]
    assert tenure.Config(1, [1]).observers == []


def test_step_single_voter_elects_itself_through_persist_and_persisted() -> None:
    node = tenure.Node(tenure.Config(1, [1], seed=7), tenure.HardState(), 0)
    now = 0
    persisted: Optional[tenure.HardState] = None
    events: List[tenure.Event] = []
    for _ in range(20):
        if node.status().role == tenure.Role.LEADER:
            break
        due = node.next_deadline_ns
        assert due is not None, "a follower always has a deadline"
        now = max(now, due)
        actions = node.step(now, tenure.Input.tick())
        while actions:
            action = actions.pop(0)
            if action.state is not None:
                persisted = action.state
                actions += node.step(now, tenure.Input.persisted(action.state))
            elif action.event is not None:
                events.append(action.event)
    status = node.status()
    assert status.role == tenure.Role.LEADER and status.leader == 1
    assert persisted == tenure.HardState(status.term, 1) == status.persisted
    became = [e for e in events if e.kind == tenure.EventKind.BECAME_LEADER]
    assert became and became[0].token == tenure.Token(status.term, 1) == node.token
    assert node.admits(tenure.Token(status.term, 1))
    assert not node.admits(tenure.Token(status.term - 1, 1))


def test_frames_between_python_nodes_elect_one_leader_and_all_learn_it() -> None:
    net = Net(configs(3))
    leader = net.elect()
    for _ in range(10):
        net.advance()
    token = leader.token
    assert token is not None and token.leader == leader.id
    assert {n.status().leader for n in net.nodes.values()} == {leader.id}
    assert all(sum(n.drops().values()) == 0 for n in net.nodes.values())


def test_frames_after_the_leader_is_cut_off_a_new_leader_has_a_larger_token() -> None:
    net = Net(configs(3))
    first = net.elect()
    old = first.token
    net.cut.add(address(7000 + first.id))
    second = net.elect()
    assert second.id != first.id
    assert second.token is not None and old is not None and second.token > old


def key_file(path: Path) -> str:
    path.write_text(os.urandom(32).hex() + "\n")
    path.chmod(0o600)
    return str(path)


def test_frames_authenticated_with_a_cluster_key_elect_and_forgeries_are_dropped(
    tmp_path: Path,
) -> None:
    key = key_file(tmp_path / "cluster.key")
    made = []
    for d in ("d1", "d2", "d3", "x"):
        (tmp_path / d).mkdir()
    for i in (1, 2, 3):
        made += [c for c in configs(3, key_file=key, data_dir=str(tmp_path / f"d{i}")) if c.id == i]
    net = Net(made)
    leader = net.elect()
    assert leader.token is not None
    # A node holding another key, at node 2's address, cannot take part:
    # its frames are dropped.
    stranger = configs(3, key_file=key_file(tmp_path / "other.key"), data_dir=str(tmp_path / "x"))[1]
    intruder = tenure.Node(stranger, tenure.HardState(), net.now)
    follower = next(a for a, n in net.nodes.items() if n is not leader and a != address(7002))
    forged = [
        a.data
        for a in intruder.step(net.now, tenure.Input.promote())
        if a.kind == tenure.ActionKind.SEND and a.addr == follower and a.data is not None
    ]
    assert forged
    for data in forged:
        assert net.nodes[follower].step(net.now, tenure.Input.receive(data, address(7002))) == []
    drops = net.nodes[follower].drops()
    assert drops["unknown_key"] == len(forged), drops


def test_hostile_datagrams_are_dropped_and_counted_never_raised() -> None:
    net = Net(configs(3))
    node = net.node(1)
    frame = None
    for action in net.node(2).step(0, tenure.Input.promote()):
        if action.kind == tenure.ActionKind.SEND and action.addr == address(7001):
            frame = action.data
    assert frame is not None
    hostile = [
        (b"", address(7002)),
        (b"\x00", address(7002)),
        (os.urandom(64), address(7002)),
        (b"\xff" * 5000, address(7003)),
        (frame[: len(frame) // 2], address(7002)),
        (frame, ("127.0.0.1", 9)),  # a real frame from an address no peer has
    ]
    for data, source in hostile:
        assert node.step(0, tenure.Input.receive(data, source)) == []
    drops = node.drops()
    assert drops["malformed"] >= 4 and drops["unknown_sender"] == 1, drops
    assert node.status().term == 0
    # The real frame from its peer's address still counts.
    assert node.step(0, tenure.Input.receive(frame, address(7002))) != []


def test_caller_misuse_raises_typed_errors() -> None:
    with pytest.raises(ValueError, match="ip:port"):
        tenure.Input.receive(b"x", "not an address")
    with pytest.raises(ValueError, match="not an IP"):
        tenure.Input.receive(b"x", ("example.org", 80))
    with pytest.raises(ValueError, match="vote"):
        tenure.HardState(1, 0)
    with pytest.raises(TypeError):
        tenure.Node(tenure.Config(1, [1]), "not a state", 0)  # type: ignore[arg-type]
    with pytest.raises(OverflowError):
        tenure.Node(tenure.Config(1, [1]), tenure.HardState(), -1)


def test_values_are_frozen_compare_by_value_and_show_themselves() -> None:
    assert tenure.Input.tick() == tenure.Input.tick()
    assert tenure.Input.transfer(2) != tenure.Input.transfer(3)
    assert repr(tenure.Input.persisted(tenure.HardState(2, 1))) == "Input.persisted(HardState(term=2, vote=1))"
    assert repr(tenure.Input.hand_over()) == "Input.hand_over()"
    assert tenure.Token(2, 1) < tenure.Token(2, 3) < tenure.Token(3, 1)
    assert len({tenure.HardState(1, 2), tenure.HardState(1, 2)}) == 1
    with pytest.raises(AttributeError):
        setattr(tenure.HardState(1, 2), "term", 3)


def test_state_file_round_trip_is_what_tenure_state_reads(tmp_path: Path) -> None:
    data = tmp_path / "data"
    state = tenure.StateFile(str(data), 3, 9)
    assert state.load() == tenure.HardState()
    state.save(tenure.HardState(5, 2))
    state.close()
    again = tenure.StateFile(str(data), 3, 9)
    assert again.load() == tenure.HardState(5, 2)
    again.close()
    record = (data / "tenure.state").read_bytes()
    assert tenure.decode_state(record) == (tenure.HardState(5, 2), (3, 9))
    assert tenure.encode_state(3, 9, tenure.HardState(5, 2)) == record
    assert not (data / "tenure.state.tmp").exists()


def test_state_file_damaged_raises_state_error_and_is_left_as_it_was(tmp_path: Path) -> None:
    data = tmp_path / "data"
    tenure.StateFile(str(data), 3, 9).close()
    record = bytearray((data / "tenure.state").read_bytes())
    record[-1] ^= 0xFF
    (data / "tenure.state").write_bytes(bytes(record))
    state = tenure.StateFile(str(data), 3, 9)
    with pytest.raises(tenure.StateError, match="tenure.state"):
        state.load()
    state.close()
    assert (data / "tenure.state").read_bytes() == bytes(record)
    with pytest.raises(tenure.StateError):
        tenure.decode_state(bytes(record))


def test_state_file_of_another_node_or_locked_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    mine = tenure.StateFile(str(data), 3, 9)
    with pytest.raises(tenure.StateError, match="lock"):
        tenure.StateFile(str(data), 3, 9)
    mine.save(tenure.HardState(4, None))
    mine.close()
    with pytest.raises(tenure.StateError, match="node 3 of cluster 9"):
        tenure.StateFile(str(data), 4, 9).load()
    with pytest.raises(tenure.StateError, match="closed"):
        mine.load()


def test_membership_records_are_checked_before_use_and_round_trip(tmp_path: Path) -> None:
    """A membership change through the binding: every member gets a
    persist-membership action whose record restarts it on that membership;
    damaged or foreign records are refused, never half used."""
    net = Net(configs(3))
    leader = net.elect().id
    removed = next(i for i in (1, 2, 3) if i != leader)
    net.feed(address(7000 + leader), tenure.Input.remove_member(removed))
    net.run(2_000_000_000)
    kept = next(i for i in (1, 2, 3) if i not in (leader, removed))
    record, membership = net.memberships[kept]
    assert net.node(kept).status().membership == membership
    assert net.node(kept).status().voters == sorted([leader, kept])
    config = configs(3)[kept - 1]
    restarted = tenure.Node(config.with_membership(record), tenure.HardState(), 0)
    assert restarted.status().voters == sorted([leader, kept])
    # Another node's record, a damaged one: refused by name.
    with pytest.raises(tenure.ConfigError, match="not node") as err:
        configs(3)[leader - 1].with_membership(record)
    assert err.value.setting == "membership"
    damaged = bytearray(record)
    damaged[-1] ^= 1
    with pytest.raises(tenure.ConfigError, match="membership record"):
        tenure.Config(kept, [1, 2, 3], cluster_id=9, membership=bytes(damaged))
    # The state file keeps it beside the state, and refuses the others.
    state = tenure.StateFile(str(tmp_path / "data"), kept, 9)
    assert state.load_membership() is None
    with pytest.raises(tenure.StateError, match="membership record"):
        state.save_membership(bytes(damaged))
    with pytest.raises(tenure.StateError, match="not node"):
        state.save_membership(net.memberships[leader][0])
    assert state.load_membership() is None
    state.save_membership(record)
    assert state.load_membership() == record
    state.close()


def test_membership_change_inputs_are_checked() -> None:
    with pytest.raises(ValueError, match="ip:port"):
        tenure.Input.add_voter(4, "not an address")
    with pytest.raises(ValueError, match="no node"):
        tenure.Input.remove_member(0)
    with pytest.raises(ValueError, match="no node"):
        tenure.Input.replace_voter(0, 4, "127.0.0.1:7004")
    change = tenure.Input.add_observer(4, "127.0.0.1:7004")
    assert change.kind == tenure.InputKind.CHANGE_MEMBERSHIP
    assert change == tenure.Input.add_observer(4, "127.0.0.1:7004")


def test_log_up_to_date_a_node_behind_never_wins_and_positions_need_log_positions() -> None:
    """With log positions, the voters ahead refuse the one behind: it
    cannot lead, however often it campaigns."""
    net = Net(configs(3, log_positions=True), positions={1: 5, 2: 10, 3: 10})
    for _ in range(5):
        net.feed(address(7001), tenure.Input.promote())
        leader = net.elect()
        assert leader.id != 1, "the node behind won"
        leader_at = address(7000 + leader.id)
        net.feed(leader_at, tenure.Input.demote())
        net.run(400_000_000)
    plain = tenure.Node(configs(1)[0], tenure.HardState(), 0)
    with pytest.raises(ValueError, match="log_positions"):
        plain.step(0, tenure.Input.log_position(3))
    with pytest.raises(ValueError, match="log_positions"):
        tenure.Node(configs(1)[0], tenure.HardState(), 0, log_position=3)
    with pytest.raises(ValueError, match="log_position="):
        tenure.Node(configs(1, log_positions=True)[0], tenure.HardState(), 0)
    assert repr(tenure.Input.log_position(3)) == "Input.log_position(3)"


def test_log_up_to_date_positions_are_taken_as_reported_at_the_extremes_and_backwards() -> None:
    """With node 3 cut off and node 1 never campaigning (mode voter), node
    2 needs node 1's vote: it gets it only while its position is at least
    node 1's, up to the largest u64, and a position reported lower
    afterwards (a log cut back) counts."""
    top = 2**64 - 1
    nodes = configs(3, log_positions=True)
    nodes[0] = configs(3, log_positions=True, mode="voter")[0]
    net = Net(nodes)
    net.cut.add(address(7003))

    def campaign(id: int) -> Optional[int]:
        net.feed(address(7000 + id), tenure.Input.promote())
        net.run(100_000_000)
        leader = net.leader()
        return None if leader is None else leader.id

    for id, position in ((1, top), (2, top - 1), (3, top)):
        net.feed(address(7000 + id), tenure.Input.log_position(position))
    assert campaign(2) is None, "node 2, behind, won"
    net.feed(address(7002), tenure.Input.log_position(top))
    assert campaign(2) == 2, "node 2, level with node 1, lost"
    net.feed(address(7002), tenure.Input.demote())
    net.feed(address(7002), tenure.Input.log_position(5))
    net.run(400_000_000)
    for _ in range(3):
        assert campaign(2) is None, "node 2, cut back to 5, won"


def test_membership_ack_of_another_membership_is_ignored() -> None:
    """`Input.persisted_membership` with an id no write carries (stale or
    forged) changes nothing: the node acts only on what it stored."""
    net = Net(configs(3))
    leader = net.elect()
    before = leader.status().membership
    for forged in (
        tenure.MembershipId(before.epoch + 1, leader.status().term, before.fingerprint),
        tenure.MembershipId(2**64 - 1, 2**64 - 1, 0),
        before,
    ):
        assert leader.step(net.now, tenure.Input.persisted_membership(forged)) == []
        assert leader.status().membership == before


def test_membership_a_node_outside_the_voters_waits_joins_as_an_observer_and_is_promoted() -> None:
    net = Net(configs(3) + [tenure.Config(4, [1, 2, 3], cluster_id=9, seed=4,
                                          peers={j: f"127.0.0.1:{7000 + j}" for j in (1, 2, 3)})])
    joining = net.node(4)
    assert joining.next_deadline_ns is None and not joining.status().is_voter
    leader = net.elect()
    assert leader.id != 4
    net.feed(address(7000 + leader.id), tenure.Input.add_observer(4, "127.0.0.1:7004"))
    net.run(1_000_000_000)
    assert joining.status().observers == [4] and joining.status().leader == leader.id
    assert 4 in net.memberships, "the joining node stored the membership naming it"
    net.feed(address(7000 + leader.id), tenure.Input.promote_observer(4))
    net.run(2_000_000_000)
    assert all(net.node(i).status().voters == [1, 2, 3, 4] for i in (1, 2, 3, 4))
    assert joining.status().is_voter and net.memberships[4][1] == joining.status().membership
    # A replacement that never answers does not catch up: the voters stay.
    net.feed(address(7000 + leader.id), tenure.Input.replace_voter(4, 5, "127.0.0.1:7005"))
    net.run(3_000_000_000)
    failed = [e for e in net.events if e.kind == tenure.EventKind.MEMBERSHIP_CHANGE_FAILED]
    assert failed and failed[-1].reason == "not_caught_up"
    assert all(net.node(i).status().voters == [1, 2, 3, 4] for i in (1, 2, 3, 4))
