"""tenure: a Raft-style leader election and fencing engine for Python.

The engine is Rust (the `tenure` crate); this package wraps it directly:

- `Node(config, state, now_ns)` is one election node with the wire framing
  `tenure node` speaks. Feed it `Input`s with `step(now_ns, input)` and
  execute the `Action`s it returns, in order; tick it at
  `next_deadline_ns`.
- `StateFile` keeps its durable state in the format `tenure state` reads.
- `tenure.aio` runs a node on asyncio: UDP, timers, durable writes off the
  loop, and `async with node.leadership()`.
"""

from ._tenure import (
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
    MembershipId,
    Node,
    Role,
    StateError,
    StateFile,
    Status,
    Token,
    decode_state,
    encode_state,
)

__all__ = [
    "Action",
    "ActionKind",
    "Config",
    "ConfigError",
    "Event",
    "EventKind",
    "HardState",
    "Input",
    "InputKind",
    "Lease",
    "MembershipId",
    "Node",
    "Role",
    "StateError",
    "StateFile",
    "Status",
    "Token",
    "decode_state",
    "encode_state",
]
