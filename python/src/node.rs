//! `Node`: one engine node with its framing; `Input`, `Action` and
//! `Event`, the values that go in and come out of `Node.step`.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use tenure::adapters::auth::PeerAuth;
use tenure::adapters::driver::{WirePosition, follow_membership};
use tenure::adapters::storage::{StateOwner, encode_membership_record};
use tenure::adapters::udp::{Framing, Received};
use tenure::{Instant, MembershipChange, MembershipId, NodeId};

use crate::config::{Config, refused};
use crate::types::{HardState, Lease, MembershipId as PyMembershipId, Status, Token};

value_enum! {
    /// What an `Input` is.
    InputKind {
        /// Time passed: feed it at or after `Node.next_deadline_ns`.
        Tick,
        /// A datagram arrived.
        Receive,
        /// The state of the last persist action is durable.
        Persisted,
        /// Campaign now, for one term.
        Promote,
        /// Resign leadership; do not campaign for a death timeout.
        Demote,
        /// Hand leadership to `to`.
        Transfer,
        /// Hand leadership to the best voter before a planned stop.
        HandOver,
        /// The membership of the last persist-membership action is durable.
        PersistedMembership,
        /// Change the membership (at the leader).
        ChangeMembership,
        /// The application's durable log position (`log_positions` nodes).
        LogPosition,
    }
}

/// One input to `Node.step`, made with its constructors (`Input.tick()`,
/// `Input.receive(data, addr)`, ...).
#[pyclass(module = "tenure", frozen, eq)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Input {
    /// What it is.
    #[pyo3(get)]
    kind: InputKind,
    data: Vec<u8>,
    from: Option<SocketAddr>,
    /// `PERSISTED`: the state now durable.
    #[pyo3(get)]
    state: Option<HardState>,
    /// `TRANSFER`: the node to hand leadership to.
    #[pyo3(get)]
    to: Option<u64>,
    /// `PERSISTED_MEMBERSHIP`: the membership now durable.
    #[pyo3(get)]
    membership: Option<PyMembershipId>,
    change: Option<MembershipChange>,
    /// `LOG_POSITION`: the position.
    #[pyo3(get)]
    position: Option<u64>,
}

impl Input {
    fn of(kind: InputKind) -> Input {
        Input {
            kind,
            data: Vec::new(),
            from: None,
            state: None,
            to: None,
            membership: None,
            change: None,
            position: None,
        }
    }

    fn change(change: MembershipChange) -> Input {
        Input {
            change: Some(change),
            ..Input::of(InputKind::ChangeMembership)
        }
    }
}

/// A member's id for a membership change: never 0.
fn member(id: u64) -> PyResult<u64> {
    if id == 0 {
        return Err(PyValueError::new_err("node id 0 means \"no node\""));
    }
    Ok(id)
}

/// A new member's `"ip:port"` address, checked.
fn member_address(address: &str) -> PyResult<String> {
    address
        .parse::<SocketAddr>()
        .map_err(|e| PyValueError::new_err(format!("address {address:?} is not ip:port ({e})")))?;
    Ok(address.to_string())
}

/// An address from `"ip:port"` text or an `(host, port, ...)` tuple as
/// asyncio's `datagram_received` gives it.
fn address(addr: &Bound<'_, PyAny>) -> PyResult<SocketAddr> {
    if let Ok(text) = addr.extract::<String>() {
        return text
            .parse()
            .map_err(|e| PyValueError::new_err(format!("addr {text:?} is not ip:port ({e})")));
    }
    let tuple = addr
        .cast::<PyTuple>()
        .map_err(|_| PyValueError::new_err("addr must be \"ip:port\" or a (host, port) tuple"))?;
    if tuple.len() < 2 {
        return Err(PyValueError::new_err(
            "addr must be \"ip:port\" or a (host, port) tuple",
        ));
    }
    let host: String = tuple.get_item(0)?.extract()?;
    let port: u16 = tuple.get_item(1)?.extract()?;
    let ip: IpAddr = host
        .parse()
        .map_err(|e| PyValueError::new_err(format!("addr host {host:?} is not an IP ({e})")))?;
    Ok(SocketAddr::new(ip, port))
}

#[pymethods]
impl Input {
    /// Time passed.
    #[staticmethod]
    fn tick() -> Input {
        Input::of(InputKind::Tick)
    }

    /// A datagram `data` arrived from `addr` (`"ip:port"` or the `(host,
    /// port)` tuple asyncio gives).
    #[staticmethod]
    fn receive(data: &[u8], addr: &Bound<'_, PyAny>) -> PyResult<Input> {
        Ok(Input {
            // Borrowed from the `bytes` object (a `Vec<u8>` argument would
            // be extracted element by element) and copied once.
            data: data.to_vec(),
            from: Some(address(addr)?),
            ..Input::of(InputKind::Receive)
        })
    }

    /// Storage confirmed `state` (the one the persist action carried).
    #[staticmethod]
    fn persisted(state: HardState) -> Input {
        Input {
            state: Some(state),
            ..Input::of(InputKind::Persisted)
        }
    }

    /// Campaign now, for one term (modes candidate and manual).
    #[staticmethod]
    fn promote() -> Input {
        Input::of(InputKind::Promote)
    }

    /// Resign leadership in the same term.
    #[staticmethod]
    fn demote() -> Input {
        Input::of(InputKind::Demote)
    }

    /// Hand leadership to node `to`.
    #[staticmethod]
    fn transfer(to: u64) -> Input {
        Input {
            to: Some(to),
            ..Input::of(InputKind::Transfer)
        }
    }

    /// Hand leadership to the best voter before a planned stop (or resign).
    #[staticmethod]
    fn hand_over() -> Input {
        Input::of(InputKind::HandOver)
    }

    /// The application's log is durable up to `position` (nodes made with
    /// `Config(log_positions=True)`): votes go to the most up-to-date
    /// candidate. Report it at start and whenever it grows.
    #[staticmethod]
    fn log_position(position: u64) -> Input {
        Input {
            position: Some(position),
            ..Input::of(InputKind::LogPosition)
        }
    }

    /// Storage confirmed the membership `membership` (the id the
    /// persist-membership action carried).
    #[staticmethod]
    fn persisted_membership(membership: PyMembershipId) -> Input {
        Input {
            membership: Some(membership),
            ..Input::of(InputKind::PersistedMembership)
        }
    }

    /// Add node `id`, reached at `address` (`"ip:port"`), as a voter: it
    /// joins as an observer and votes once it caught up.
    #[staticmethod]
    fn add_voter(id: u64, address: &str) -> PyResult<Input> {
        Ok(Input::change(MembershipChange::AddVoter {
            id: member(id)?,
            address: member_address(address)?,
        }))
    }

    /// Add node `id`, reached at `address`, as an observer.
    #[staticmethod]
    fn add_observer(id: u64, address: &str) -> PyResult<Input> {
        Ok(Input::change(MembershipChange::AddObserver {
            id: member(id)?,
            address: member_address(address)?,
        }))
    }

    /// Make observer `id` a voter, once it caught up.
    #[staticmethod]
    fn promote_observer(id: u64) -> PyResult<Input> {
        Ok(Input::change(MembershipChange::Promote { id: member(id)? }))
    }

    /// Remove voter or observer `id`.
    #[staticmethod]
    fn remove_member(id: u64) -> PyResult<Input> {
        Ok(Input::change(MembershipChange::Remove { id: member(id)? }))
    }

    /// Replace voter `old` by the new node `new`, reached at `address`, in
    /// one joint change.
    #[staticmethod]
    fn replace_voter(old: u64, new: u64, address: &str) -> PyResult<Input> {
        Ok(Input::change(MembershipChange::Replace {
            old: member(old)?,
            new: member(new)?,
            address: member_address(address)?,
        }))
    }

    /// `RECEIVE`: the datagram.
    #[getter]
    fn data<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        (self.kind == InputKind::Receive).then(|| PyBytes::new(py, &self.data))
    }

    /// `RECEIVE`: its source, `(ip, port)`.
    #[getter]
    fn addr(&self) -> Option<(String, u16)> {
        self.from.map(|a| (a.ip().to_string(), a.port()))
    }

    pub(crate) fn __repr__(&self) -> String {
        match self.kind {
            InputKind::Receive => format!(
                "Input.receive(<{} bytes>, {:?})",
                self.data.len(),
                self.from.map(|a| a.to_string()).unwrap_or_default()
            ),
            InputKind::Persisted => format!(
                "Input.persisted({})",
                self.state.unwrap_or_default().__repr__()
            ),
            InputKind::Transfer => format!("Input.transfer({})", self.to.unwrap_or(0)),
            InputKind::PersistedMembership => format!(
                "Input.persisted_membership({})",
                self.membership.unwrap_or_default().__repr__()
            ),
            InputKind::ChangeMembership => format!("Input.change_membership({:?})", self.change),
            InputKind::LogPosition => {
                format!("Input.log_position({})", self.position.unwrap_or_default())
            }
            other => format!("Input.{}()", snake(&format!("{other:?}"))),
        }
    }
}

/// `HandOver` -> `hand_over`.
fn snake(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            out.push('_');
        }
        out.extend(c.to_lowercase());
    }
    out
}

value_enum! {
    /// What an `Action` asks for.
    ActionKind {
        /// Store `state` durably (write, fsync), then feed
        /// `Input.persisted(state)`. A later one supersedes an earlier one.
        Persist,
        /// Send `data` to peer `to` at `addr`.
        Send,
        /// Tell the application: `event`.
        Event,
        /// Store the membership record `data` durably
        /// (`StateFile.save_membership`), then feed
        /// `Input.persisted_membership(membership)`.
        PersistMembership,
    }
}

/// One thing a node asks its driver to do; execute them in order.
#[pyclass(module = "tenure", frozen, eq)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Action {
    /// What to do.
    #[pyo3(get)]
    kind: ActionKind,
    /// `PERSIST`: the state to store.
    #[pyo3(get)]
    state: Option<HardState>,
    /// `SEND`: the peer (`0` if only its address is known).
    #[pyo3(get)]
    to: u64,
    data: Vec<u8>,
    dest: Option<SocketAddr>,
    /// `EVENT`: the event.
    #[pyo3(get)]
    event: Option<Event>,
    /// `PERSIST_MEMBERSHIP`: the id of the membership `data` holds.
    #[pyo3(get)]
    membership: Option<PyMembershipId>,
}

impl Action {
    fn of(kind: ActionKind) -> Action {
        Action {
            kind,
            state: None,
            to: 0,
            data: Vec::new(),
            dest: None,
            event: None,
            membership: None,
        }
    }

    fn send(to: NodeId, data: Vec<u8>, dest: SocketAddr) -> Action {
        Action {
            to,
            data,
            dest: Some(dest),
            ..Action::of(ActionKind::Send)
        }
    }
}

#[pymethods]
impl Action {
    /// `SEND`: the datagram; `PERSIST_MEMBERSHIP`: the membership record.
    #[getter]
    fn data<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        matches!(self.kind, ActionKind::Send | ActionKind::PersistMembership)
            .then(|| PyBytes::new(py, &self.data))
    }

    /// `SEND`: the peer's address, `(ip, port)`, as `sendto` takes it.
    #[getter]
    fn addr(&self) -> Option<(String, u16)> {
        self.dest.map(|a| (a.ip().to_string(), a.port()))
    }

    pub(crate) fn __repr__(&self) -> String {
        match self.kind {
            ActionKind::Persist => format!(
                "Action.PERSIST({})",
                self.state.unwrap_or_default().__repr__()
            ),
            ActionKind::Send => format!(
                "Action.SEND(to={}, addr={:?}, <{} bytes>)",
                self.to,
                self.dest.map(|a| a.to_string()).unwrap_or_default(),
                self.data.len()
            ),
            ActionKind::PersistMembership => format!(
                "Action.PERSIST_MEMBERSHIP({}, <{} bytes>)",
                self.membership.unwrap_or_default().__repr__(),
                self.data.len()
            ),
            ActionKind::Event => format!(
                "Action.EVENT({})",
                self.event
                    .as_ref()
                    .map_or_else(String::new, Event::__repr__)
            ),
        }
    }
}

value_enum! {
    /// What an `Event` reports.
    EventKind {
        /// This node won `term`; `token` is its leadership's token.
        BecameLeader,
        /// This node stopped leading `term` (`reason` says why).
        SteppedDown,
        /// The known leader of `term` is now `node` (`None`: none known).
        LeaderChanged,
        /// This node campaigns for `term`.
        CampaignStarted,
        /// `node` claimed leadership of `term`, whose leader is known.
        ConflictingLeader,
        /// A promote input did not make this node leader (`reason`).
        PromoteFailed,
        /// This node holds a strict lease for `token` until `valid_until_ns`.
        LeaseAcquired,
        /// The lease of `token` now ends earlier, at `valid_until_ns`.
        LeaseShortened,
        /// The lease of `token` is gone: stop acting as the only leader.
        LeaseLost,
        /// A transfer to `node` completed.
        TransferCompleted,
        /// This leader hands leadership back to `node`, a better-ranked voter.
        HandingBack,
        /// A transfer to `node` failed (`reason`).
        TransferFailed,
        /// The membership this node acts on is now `epoch`.
        MembershipChanged,
        /// The leader's membership change reached `epoch`.
        MembershipChangeCompleted,
        /// A membership change failed.
        MembershipChangeFailed,
        /// Peers saw this node use term `term`, above the one it restarted
        /// with: its state went back (a restored copy).
        RollbackSuspected,
        /// Peer `node` disagrees about the membership.
        MembershipConflict,
        /// An event these bindings do not name yet: read `description`.
        Other,
    }
}

/// What happened. Fields a kind does not mention are `None`.
#[pyclass(module = "tenure", frozen, eq, from_py_object)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Event {
    /// What happened.
    #[pyo3(get)]
    kind: EventKind,
    /// The term the event is about.
    #[pyo3(get)]
    term: Option<u64>,
    /// The node the event names (a leader, a transfer target, a peer).
    #[pyo3(get)]
    node: Option<u64>,
    /// The leadership's token (became leader, lease events).
    #[pyo3(get)]
    token: Option<Token>,
    /// When a lease ends, on the `now_ns` clock.
    #[pyo3(get)]
    valid_until_ns: Option<u64>,
    /// A membership's epoch.
    #[pyo3(get)]
    epoch: Option<u64>,
    /// Why (stepped down, promote failed, transfer failed, handing back),
    /// in snake case (`"quorum_lost"`, `"timed_out"`).
    #[pyo3(get)]
    reason: Option<String>,
    /// The whole event as text, for logs.
    #[pyo3(get)]
    description: String,
}

/// A reason's name in snake case: `QuorumLost` -> `quorum_lost`,
/// `OtherLeader { leader: Some(2) }` -> `other_leader`.
fn reason(value: &impl std::fmt::Debug) -> Option<String> {
    let text = format!("{value:?}");
    let name = text.split([' ', '{', '(']).next().unwrap_or_default();
    Some(snake(name))
}

impl From<&tenure::Event> for Event {
    fn from(event: &tenure::Event) -> Event {
        use tenure::Event as E;
        let mut e = Event {
            kind: EventKind::Other,
            term: None,
            node: None,
            token: None,
            valid_until_ns: None,
            epoch: None,
            reason: None,
            description: format!("{event:?}"),
        };
        match event {
            E::BecameLeader { term, token, .. } => {
                (e.kind, e.term, e.node) =
                    (EventKind::BecameLeader, Some(*term), Some(token.leader));
                e.token = Some((*token).into());
            }
            E::SteppedDown {
                term, reason: r, ..
            } => {
                (e.kind, e.term, e.reason) = (EventKind::SteppedDown, Some(*term), reason(r));
            }
            E::LeaderChanged { term, leader } => {
                (e.kind, e.term, e.node) = (EventKind::LeaderChanged, Some(*term), *leader);
            }
            E::CampaignStarted { term } => {
                (e.kind, e.term) = (EventKind::CampaignStarted, Some(*term))
            }
            E::ConflictingLeader { term, claimed, .. } => {
                (e.kind, e.term, e.node) =
                    (EventKind::ConflictingLeader, Some(*term), Some(*claimed));
            }
            E::PromoteFailed { reason: r } => {
                (e.kind, e.reason) = (EventKind::PromoteFailed, reason(r))
            }
            E::LeaseAcquired {
                token, valid_until, ..
            } => {
                (e.kind, e.term) = (EventKind::LeaseAcquired, Some(token.term));
                (e.token, e.valid_until_ns) = (Some((*token).into()), Some(valid_until.as_nanos()));
            }
            E::LeaseShortened {
                token, valid_until, ..
            } => {
                (e.kind, e.term) = (EventKind::LeaseShortened, Some(token.term));
                (e.token, e.valid_until_ns) = (Some((*token).into()), Some(valid_until.as_nanos()));
            }
            E::LeaseLost { token, .. } => {
                (e.kind, e.term, e.token) = (
                    EventKind::LeaseLost,
                    Some(token.term),
                    Some((*token).into()),
                );
            }
            E::TransferCompleted { to } => {
                (e.kind, e.node) = (EventKind::TransferCompleted, Some(*to))
            }
            E::HandingBack { to, reason: r } => {
                (e.kind, e.node, e.reason) = (EventKind::HandingBack, Some(*to), reason(r));
            }
            E::TransferFailed { to, reason: r } => {
                (e.kind, e.node, e.reason) = (EventKind::TransferFailed, Some(*to), reason(r));
            }
            E::MembershipChanged { epoch, .. } => {
                (e.kind, e.epoch) = (EventKind::MembershipChanged, Some(*epoch));
            }
            E::MembershipChangeCompleted { epoch } => {
                (e.kind, e.epoch) = (EventKind::MembershipChangeCompleted, Some(*epoch));
            }
            E::MembershipChangeFailed { reason: r } => {
                (e.kind, e.reason) = (EventKind::MembershipChangeFailed, reason(r));
            }
            E::RollbackSuspected { seen, .. } => {
                (e.kind, e.term) = (EventKind::RollbackSuspected, Some(*seen));
            }
            E::MembershipConflict { peer, .. } => {
                (e.kind, e.node) = (EventKind::MembershipConflict, Some(*peer));
            }
            _ => {}
        }
        e
    }
}

#[pymethods]
impl Event {
    pub(crate) fn __repr__(&self) -> String {
        let mut fields = vec![format!(
            "EventKind.{}",
            screaming(&format!("{:?}", self.kind))
        )];
        let mut field = |name: &str, value: Option<String>| {
            if let Some(v) = value {
                fields.push(format!("{name}={v}"));
            }
        };
        field("term", self.term.map(|v| v.to_string()));
        field("node", self.node.map(|v| v.to_string()));
        field("token", self.token.map(|t| t.__repr__()));
        field("valid_until_ns", self.valid_until_ns.map(|v| v.to_string()));
        field("epoch", self.epoch.map(|v| v.to_string()));
        field("reason", self.reason.as_ref().map(|r| format!("{r:?}")));
        format!("Event({})", fields.join(", "))
    }
}

fn screaming(name: &str) -> String {
    snake(name).to_uppercase()
}

/// The engine and its action buffer, with log positions of type `P` (`()`
/// without them).
struct Engine<P> {
    node: tenure::Node<P>,
    out: Vec<tenure::Action<P>>,
}

/// A node with or without log positions (`Config(log_positions=True)`).
enum Engines {
    Plain(Box<Engine<()>>),
    Positioned(Box<Engine<u64>>),
}

/// Runs `$body` with `$e` bound to the engine, whichever it is.
macro_rules! engine {
    ($engines:expr, $e:ident => $body:expr) => {
        match $engines {
            Engines::Plain($e) => $body,
            Engines::Positioned($e) => $body,
        }
    };
}

/// Everything but the engine.
struct Io {
    framing: Framing,
    /// Whose membership records this node writes.
    owner: StateOwner,
    known: Option<MembershipId>,
}

impl<P: WirePosition> Engine<P> {
    fn new(c: &Config, state: HardState, now_ns: u64) -> Result<Engine<P>, tenure::ConfigError> {
        let node = tenure::Node::new(c.config.clone(), state.into(), Instant::from_nanos(now_ns))?;
        Ok(Engine {
            node,
            out: Vec::new(),
        })
    }

    /// Turns the engine's actions into `Action`s in order, framing every
    /// message with the stamp of the step that decided it; then follows
    /// the node's membership and adds the framing's greetings.
    fn take(&mut self, io: &mut Io, into: &mut Vec<Action>) {
        for action in self.out.drain(..) {
            match action {
                tenure::Action::Persist(state) => into.push(Action {
                    state: Some(state.into()),
                    ..Action::of(ActionKind::Persist)
                }),
                tenure::Action::Send { to, message } => {
                    // None is counted as `send_failed`; loss is tolerated.
                    if let Some((bytes, addr)) = io.framing.frame(to, &message) {
                        into.push(Action::send(to, bytes, addr));
                    }
                }
                tenure::Action::PersistMembership(membership) => into.push(Action {
                    membership: Some(membership.id().into()),
                    data: encode_membership_record(io.owner, &membership),
                    ..Action::of(ActionKind::PersistMembership)
                }),
                tenure::Action::Event(event) => into.push(Action {
                    event: Some((&event).into()),
                    ..Action::of(ActionKind::Event)
                }),
            }
        }
        follow_membership(&self.node, &mut io.framing, &mut io.known);
        // Greetings go to an address; the peer's id is not looked up.
        for (bytes, addr) in io.framing.take_control() {
            into.push(Action::send(0, bytes, addr));
        }
    }

    /// Feeds `input` and appends what follows to `actions`; `position`
    /// makes a log position of this engine's type.
    fn step(
        &mut self,
        io: &mut Io,
        now_ns: u64,
        input: &Input,
        actions: &mut Vec<Action>,
        position: impl FnOnce(u64) -> PyResult<P>,
    ) -> PyResult<()> {
        let input = match input.kind {
            InputKind::Tick => tenure::Input::Tick,
            InputKind::Receive => {
                let Some(from) = input.from else {
                    return Ok(());
                };
                match io.framing.accept::<P>(&input.data, from) {
                    Received::Message(from, message) => io.framing.input(from, message),
                    // A greeting: it may owe one back.
                    Received::Wake | Received::Timeout => {
                        self.take(io, actions);
                        return Ok(());
                    }
                    // Counted by reason in `drops()`.
                    Received::Dropped => return Ok(()),
                }
            }
            InputKind::Persisted => {
                tenure::Input::Persisted(input.state.unwrap_or_default().into())
            }
            InputKind::Promote => tenure::Input::Promote,
            InputKind::Demote => tenure::Input::Demote,
            InputKind::Transfer => tenure::Input::TransferLeadership {
                to: input.to.unwrap_or(0),
            },
            InputKind::HandOver => tenure::Input::HandOver,
            InputKind::PersistedMembership => {
                tenure::Input::PersistedMembership(input.membership.unwrap_or_default().into())
            }
            InputKind::ChangeMembership => match &input.change {
                Some(change) => tenure::Input::ChangeMembership(change.clone()),
                None => return Ok(()),
            },
            InputKind::LogPosition => {
                tenure::Input::LogPosition(position(input.position.unwrap_or_default())?)
            }
        };
        self.node
            .step_into(Instant::from_nanos(now_ns), input, &mut self.out);
        self.take(io, actions);
        Ok(())
    }
}

/// One election node with its wire framing. Not thread-safe: use a node
/// from one thread at a time (the asyncio driver uses it from its loop).
#[pyclass(module = "tenure")]
pub(crate) struct Node {
    engine: Engines,
    io: Io,
    /// Actions made before the first step (greetings to peers).
    pending: Vec<Action>,
}

#[pymethods]
impl Node {
    /// A node from `config`, restarted from `state` (what storage confirmed
    /// last; `HardState()` for a node that never ran) at `now_ns` on a
    /// monotonic clock that counts suspend (`CLOCK_BOOTTIME` on Linux).
    /// With a cluster key, takes a new incarnation from `config.data_dir`.
    /// A node made with `Config(log_positions=True)` needs `log_position`,
    /// its log's durable end, before it hears anyone (else it would grant
    /// votes as if its log were empty); other nodes take none.
    #[new]
    #[pyo3(signature = (config, state = None, now_ns = 0, log_position = None))]
    fn new(
        py: Python<'_>,
        config: PyRef<'_, Config>,
        state: Option<HardState>,
        now_ns: u64,
        log_position: Option<u64>,
    ) -> PyResult<Node> {
        let c = &*config;
        let state = state.unwrap_or_default();
        match (c.positions, log_position) {
            (true, None) => {
                return Err(PyValueError::new_err(
                    "a node with log_positions needs log_position=<its log's durable end>",
                ));
            }
            (false, Some(_)) => {
                return Err(PyValueError::new_err(
                    "log_position given to a node made without Config(log_positions=True)",
                ));
            }
            _ => {}
        }
        let engine = if c.positions {
            Engines::Positioned(Box::new(
                Engine::new(c, state, now_ns).map_err(|e| refused(py, &e))?,
            ))
        } else {
            Engines::Plain(Box::new(
                Engine::new(c, state, now_ns).map_err(|e| refused(py, &e))?,
            ))
        };
        let id = c.config.id();
        let framing = match (&c.keys, &c.data_dir) {
            (Some(ring), Some(dir)) => {
                let auth = PeerAuth::for_data_dir(ring.clone(), dir).map_err(|e| {
                    crate::StateError::new_err(format!("incarnation in {}: {e}", dir.display()))
                })?;
                Framing::authenticated(id, c.cluster, c.peers.clone(), auth)
            }
            _ => Framing::new(id, c.cluster, c.peers.clone()),
        };
        let mut made = Node {
            engine,
            io: Io {
                framing,
                owner: StateOwner {
                    node: id,
                    cluster: c.cluster,
                },
                known: None,
            },
            pending: Vec::new(),
        };
        let mut pending = Vec::new();
        engine!(&mut made.engine, e => e.take(&mut made.io, &mut pending));
        if let (Engines::Positioned(e), Some(position)) = (&mut made.engine, log_position) {
            // Recorded before any message: every vote compares against it.
            let input = tenure::Input::LogPosition(position);
            e.node
                .step_into(Instant::from_nanos(now_ns), input, &mut e.out);
            e.take(&mut made.io, &mut pending);
        }
        made.pending = pending;
        Ok(made)
    }

    /// Feeds `input` at `now_ns` (never earlier than a `now_ns` given
    /// before; an earlier one counts as the latest) and returns the actions
    /// to execute, in order. The first call's actions begin with those the
    /// node had from its start (greetings to its peers). A datagram that is
    /// not a message for this node is dropped and counted (`drops()`):
    /// no actions, no exception. A log position at a node made without
    /// `log_positions` raises `ValueError`.
    fn step(&mut self, now_ns: u64, input: PyRef<'_, Input>) -> PyResult<Vec<Action>> {
        let mut actions = std::mem::take(&mut self.pending);
        let io = &mut self.io;
        let stepped = match &mut self.engine {
            Engines::Plain(e) => e.step(io, now_ns, &input, &mut actions, |_| {
                Err(PyValueError::new_err(
                    "a log position at a node made without log_positions (Config(log_positions=True))",
                ))
            }),
            Engines::Positioned(e) => e.step(io, now_ns, &input, &mut actions, Ok),
        };
        match stepped {
            Ok(()) => Ok(actions),
            Err(e) => {
                // Nothing was fed: the earlier actions are still owed.
                self.pending = actions;
                Err(e)
            }
        }
    }

    /// The next instant (the `now_ns` clock) at which a tick has work to
    /// do; `None` when only an input can change anything. Ticking earlier
    /// is harmless.
    #[getter]
    fn next_deadline_ns(&self) -> Option<u64> {
        engine!(&self.engine, e => e.node.next_deadline()).map(Instant::as_nanos)
    }

    /// The node's id.
    #[getter]
    fn id(&self) -> u64 {
        engine!(&self.engine, e => e.node.id())
    }

    /// A snapshot of the node.
    fn status(&self) -> Status {
        engine!(&self.engine, e => e.node.status()).into()
    }

    /// The strict lease the node holds at `now_ns`, or `None` (always
    /// under soft fencing). Ask before every act as the only leader.
    fn lease(&self, now_ns: u64) -> Option<Lease> {
        engine!(&self.engine, e => e.node.lease(Instant::from_nanos(now_ns))).map(Into::into)
    }

    /// The leadership's token while this node leads, else `None`: attach
    /// it to every write made as leader.
    #[getter]
    fn token(&self) -> Option<Token> {
        engine!(&self.engine, e => e.node.status().fencing_token).map(Into::into)
    }

    /// Whether a replica beside this node may take a write made under
    /// `token`: its term is at least this node's term, and in this term it
    /// names the leader this node knows.
    fn admits(&self, token: Token) -> bool {
        engine!(&self.engine, e => e.node.admits(token.into()))
    }

    /// Datagrams dropped so far, by reason (`"malformed"`,
    /// `"foreign_cluster"`, `"unknown_sender"`, `"bad_tag"`, ...).
    fn drops(&self) -> BTreeMap<&'static str, u64> {
        self.io.framing.drops.by_reason().into_iter().collect()
    }

    pub(crate) fn __repr__(&self) -> String {
        let (id, role, term) =
            engine!(&self.engine, e => (e.node.id(), e.node.role(), e.node.term()));
        format!("Node(id={id}, role={role:?}, term={term})")
    }
}
