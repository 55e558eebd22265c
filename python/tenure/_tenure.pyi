"""Type stubs of the Rust extension (python/src); `tenure` re-exports it."""

import os
import pathlib
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union, final

_Path = Union[str, "os.PathLike[str]"]
_Addr = Union[str, Tuple[str, int]]

class ConfigError(ValueError):
    """A configuration was refused; `setting` names the argument."""

    setting: str

class StateError(Exception):
    """A state file is damaged, another node's, locked, or unwritable."""

@final
class HardState:
    term: int
    vote: Optional[int]
    def __init__(self, term: int = 0, vote: Optional[int] = None) -> None: ...
    def __hash__(self) -> int: ...

@final
class Token:
    term: int
    leader: int
    def __init__(self, term: int, leader: int) -> None: ...
    def __lt__(self, other: Token) -> bool: ...
    def __le__(self, other: Token) -> bool: ...
    def __gt__(self, other: Token) -> bool: ...
    def __ge__(self, other: Token) -> bool: ...
    def __hash__(self) -> int: ...

@final
class Lease:
    token: Token
    valid_until_ns: int

@final
class Role:
    FOLLOWER: Role
    PRE_CANDIDATE: Role
    CANDIDATE: Role
    LEADER: Role
    def __int__(self) -> int: ...

@final
class MembershipId:
    epoch: int
    term: int
    fingerprint: int
    def __init__(self, epoch: int, term: int, fingerprint: int) -> None: ...
    def __hash__(self) -> int: ...

@final
class Status:
    id: int
    role: Role
    term: int
    vote: Optional[int]
    leader: Optional[int]
    persisted: HardState
    write_in_flight: bool
    is_voter: bool
    lease_until_ns: Optional[int]
    token: Optional[Token]
    membership: MembershipId
    voters: List[int]
    observers: List[int]

@final
class Config:
    def __init__(
        self,
        id: int,
        voters: Sequence[int],
        *,
        peers: Optional[Mapping[int, str]] = None,
        cluster_id: int = 0,
        observers: Optional[Sequence[int]] = None,
        heartbeat_ms: Optional[int] = None,
        death_timeout_ms: Optional[int] = None,
        election_timeout_ms: Optional[int] = None,
        election_jitter_ms: Optional[int] = None,
        lease_margin_ms: Optional[int] = None,
        clock_drift_ppm: Optional[int] = None,
        seed: Optional[int] = None,
        mode: str = "candidate",
        fencing: str = "soft",
        key_file: Optional[_Path] = None,
        next_key_file: Optional[_Path] = None,
        data_dir: Optional[_Path] = None,
        rank_policy: str = "unranked",
        priorities: Optional[Mapping[int, int]] = None,
        membership: Optional[bytes] = None,
        log_positions: bool = False,
    ) -> None: ...
    def with_membership(self, membership: bytes) -> Config: ...
    @property
    def id(self) -> int: ...
    @property
    def voters(self) -> List[int]: ...
    @property
    def observers(self) -> List[int]: ...
    @property
    def cluster_id(self) -> int: ...
    @property
    def peers(self) -> Dict[int, str]: ...
    @property
    def data_dir(self) -> Optional[pathlib.Path]: ...
    @property
    def authenticated(self) -> bool: ...
    @property
    def heartbeat_ns(self) -> int: ...
    @property
    def election_timeout_ns(self) -> int: ...
    @property
    def strict(self) -> bool: ...
    @property
    def log_positions(self) -> bool: ...

@final
class InputKind:
    TICK: InputKind
    RECEIVE: InputKind
    PERSISTED: InputKind
    PROMOTE: InputKind
    DEMOTE: InputKind
    TRANSFER: InputKind
    HAND_OVER: InputKind
    PERSISTED_MEMBERSHIP: InputKind
    CHANGE_MEMBERSHIP: InputKind
    LOG_POSITION: InputKind
    def __int__(self) -> int: ...

@final
class Input:
    kind: InputKind
    data: Optional[bytes]
    addr: Optional[Tuple[str, int]]
    state: Optional[HardState]
    to: Optional[int]
    membership: Optional[MembershipId]
    position: Optional[int]
    @staticmethod
    def tick() -> Input: ...
    @staticmethod
    def receive(data: bytes, addr: _Addr) -> Input: ...
    @staticmethod
    def persisted(state: HardState) -> Input: ...
    @staticmethod
    def promote() -> Input: ...
    @staticmethod
    def demote() -> Input: ...
    @staticmethod
    def transfer(to: int) -> Input: ...
    @staticmethod
    def hand_over() -> Input: ...
    @staticmethod
    def log_position(position: int) -> Input: ...
    @staticmethod
    def persisted_membership(membership: MembershipId) -> Input: ...
    @staticmethod
    def add_voter(id: int, address: str) -> Input: ...
    @staticmethod
    def add_observer(id: int, address: str) -> Input: ...
    @staticmethod
    def promote_observer(id: int) -> Input: ...
    @staticmethod
    def remove_member(id: int) -> Input: ...
    @staticmethod
    def replace_voter(old: int, new: int, address: str) -> Input: ...

@final
class ActionKind:
    PERSIST: ActionKind
    SEND: ActionKind
    EVENT: ActionKind
    PERSIST_MEMBERSHIP: ActionKind
    def __int__(self) -> int: ...

@final
class EventKind:
    BECAME_LEADER: EventKind
    STEPPED_DOWN: EventKind
    LEADER_CHANGED: EventKind
    CAMPAIGN_STARTED: EventKind
    CONFLICTING_LEADER: EventKind
    PROMOTE_FAILED: EventKind
    LEASE_ACQUIRED: EventKind
    LEASE_SHORTENED: EventKind
    LEASE_LOST: EventKind
    TRANSFER_COMPLETED: EventKind
    HANDING_BACK: EventKind
    TRANSFER_FAILED: EventKind
    MEMBERSHIP_CHANGED: EventKind
    MEMBERSHIP_CHANGE_COMPLETED: EventKind
    MEMBERSHIP_CHANGE_FAILED: EventKind
    ROLLBACK_SUSPECTED: EventKind
    MEMBERSHIP_CONFLICT: EventKind
    OTHER: EventKind
    def __int__(self) -> int: ...

@final
class Event:
    kind: EventKind
    term: Optional[int]
    node: Optional[int]
    token: Optional[Token]
    valid_until_ns: Optional[int]
    epoch: Optional[int]
    reason: Optional[str]
    description: str

@final
class Action:
    kind: ActionKind
    state: Optional[HardState]
    to: int
    data: Optional[bytes]
    addr: Optional[Tuple[str, int]]
    event: Optional[Event]
    membership: Optional[MembershipId]

@final
class Node:
    def __init__(
        self,
        config: Config,
        state: Optional[HardState] = None,
        now_ns: int = 0,
        log_position: Optional[int] = None,
    ) -> None: ...
    def step(self, now_ns: int, input: Input) -> List[Action]: ...
    @property
    def next_deadline_ns(self) -> Optional[int]: ...
    @property
    def id(self) -> int: ...
    def status(self) -> Status: ...
    def lease(self, now_ns: int) -> Optional[Lease]: ...
    @property
    def token(self) -> Optional[Token]: ...
    def admits(self, token: Token) -> bool: ...
    def drops(self) -> Dict[str, int]: ...

@final
class StateFile:
    def __init__(self, data_dir: _Path, node: int, cluster: int) -> None: ...
    def load(self) -> HardState: ...
    def save(self, state: HardState) -> None: ...
    def load_membership(self) -> Optional[bytes]: ...
    def save_membership(self, record: bytes) -> None: ...
    @property
    def path(self) -> pathlib.Path: ...
    def close(self) -> None: ...

def encode_state(node: int, cluster: int, state: HardState) -> bytes: ...
def decode_state(data: bytes) -> Tuple[HardState, Optional[Tuple[int, int]]]: ...
