//! `TenureNode`: one engine node with its framing, its queue of actions,
//! and the calls that drive and read it.

use std::collections::{BTreeMap, VecDeque};
use std::ffi::{CString, c_char};
use std::net::SocketAddr;

use tenure::adapters::auth::PeerAuth;
use tenure::adapters::driver::{WirePosition, follow_membership};
use tenure::adapters::storage::{StateOwner, encode_membership_record};
use tenure::adapters::udp::{DropCounts, Framing, Received};
use tenure::{Action, Event, Input, Instant, MembershipChange, MembershipId, Node, NodeId, Role};

use crate::config::TenureConfig;
use crate::error::{Failure, TenureCode, TenureError, catch, guard, report};
use crate::{TENURE_NO_DEADLINE, TenureHardState, TenureToken, object, slice, text, write};

/// What to feed a node ([`TenureInput::kind`]).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TenureInputKind {
    /// Time passed: feed it at or after [`tenure_node_next_deadline_ns`].
    Tick = 0,
    /// A datagram arrived: `bytes`/`len` and its source `from_addr`.
    Receive = 1,
    /// The state of the last `TENURE_ACTION_KIND_PERSIST` is durable:
    /// `state`.
    Persisted = 2,
    /// Campaign now, for one term (modes manual and candidate).
    Promote = 3,
    /// Resign leadership; do not campaign for a death timeout.
    Demote = 4,
    /// Hand leadership to `to`.
    Transfer = 5,
    /// Hand leadership to the best voter before a planned stop (or resign).
    HandOver = 6,
    /// The application's durable log position: `position` (nodes made
    /// with log positions only). Feed it right after the node is made,
    /// before the first datagram (until then the node votes as if its log
    /// were empty), and whenever it grows.
    LogPosition = 7,
    /// The membership of the last `TENURE_ACTION_KIND_PERSIST_MEMBERSHIP`
    /// is durable: `membership` (the id that action carried).
    PersistedMembership = 8,
    /// Change the membership (at the leader): `change` (a
    /// [`TenureChangeKind`] value), `member`, `old` and `address` as that
    /// kind reads them. The outcome is one `MEMBERSHIP_CHANGE_COMPLETED`
    /// or `MEMBERSHIP_CHANGE_FAILED` event.
    ChangeMembership = 9,
}

/// A membership change ([`TenureInput::change`]).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TenureChangeKind {
    /// Add `member`, reached at `address`, as a voter: it joins as an
    /// observer and votes once it caught up.
    AddVoter = 0,
    /// Add `member`, reached at `address`, as an observer.
    AddObserver = 1,
    /// Make observer `member` a voter, once it caught up.
    Promote = 2,
    /// Remove voter or observer `member`.
    Remove = 3,
    /// Replace voter `old` by the new node `member`, reached at `address`,
    /// in one joint change.
    Replace = 4,
}

/// Names one membership exactly: its epoch, the term of the leader that
/// made it, and a fingerprint of its voter sets.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TenureMembershipId {
    /// The membership's epoch.
    pub epoch: u64,
    /// The term of the leader that made it.
    pub term: u64,
    /// A fingerprint of its voters, outgoing voters and observers.
    pub fingerprint: u64,
}

impl From<MembershipId> for TenureMembershipId {
    fn from(id: MembershipId) -> TenureMembershipId {
        TenureMembershipId {
            epoch: id.epoch,
            term: id.term,
            fingerprint: id.fingerprint,
        }
    }
}

impl From<TenureMembershipId> for MembershipId {
    fn from(id: TenureMembershipId) -> MembershipId {
        MembershipId {
            epoch: id.epoch,
            term: id.term,
            fingerprint: id.fingerprint,
        }
    }
}

/// One input. Set `kind` (a [`TenureInputKind`] value) and the fields
/// that kind reads; the others are ignored (zero them).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TenureInput {
    /// A [`TenureInputKind`] value.
    pub kind: u32,
    /// `RECEIVE`: the datagram.
    pub bytes: *const u8,
    /// `RECEIVE`: its length.
    pub len: usize,
    /// `RECEIVE`: its source address as `ip:port` text (NUL-terminated).
    pub from_addr: *const c_char,
    /// `PERSISTED`: the state now durable (the one the persist action
    /// carried).
    pub state: TenureHardState,
    /// `TRANSFER`: the node to hand leadership to.
    pub to: u64,
    /// `LOG_POSITION`: the position.
    pub position: u64,
    /// `PERSISTED_MEMBERSHIP`: the membership now durable.
    pub membership: TenureMembershipId,
    /// `CHANGE_MEMBERSHIP`: a [`TenureChangeKind`] value.
    pub change: u32,
    /// `CHANGE_MEMBERSHIP`: the member added, promoted or removed, or the
    /// new voter of a replace.
    pub member: u64,
    /// `CHANGE_MEMBERSHIP`: the voter a replace removes.
    pub old: u64,
    /// `CHANGE_MEMBERSHIP`: the new member's address as `ip:port` text
    /// (NUL-terminated; add and replace).
    pub address: *const c_char,
}

/// What a node asks for ([`TenureAction::kind`]).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TenureActionKind {
    /// Store `state` durably (write, fsync), then feed
    /// `TENURE_INPUT_KIND_PERSISTED` with it. At most one is outstanding;
    /// a later one supersedes an earlier one.
    Persist = 0,
    /// Send the datagram `bytes`/`len` to peer `to` at `addr`.
    Send = 1,
    /// Tell the application: `event`.
    Event = 2,
    /// Store the membership record `bytes`/`len` durably (the format of
    /// `tenure node`'s `tenure.membership`: write a temporary file, fsync,
    /// rename, fsync the directory), then feed
    /// `TENURE_INPUT_KIND_PERSISTED_MEMBERSHIP` with `membership`. Give
    /// the record to [`crate::tenure_config_set_membership`] at the next
    /// start. A program that never acknowledges it leaves the node on its
    /// old membership (safe, but changes then cannot complete).
    PersistMembership = 3,
}

/// What happened ([`TenureEvent::kind`]).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TenureEventKind {
    /// This node won `term`; `token` is its leadership's token. Under
    /// strict fencing check [`tenure_node_lease`] before acting.
    BecameLeader = 0,
    /// This node stopped leading `term`.
    SteppedDown = 1,
    /// The known leader of `term` is now `node` (`0`: none known).
    LeaderChanged = 2,
    /// This node campaigns for `term`.
    CampaignStarted = 3,
    /// `node` claimed leadership of `term`, whose leader is known.
    ConflictingLeader = 4,
    /// A promote input did not make this node leader.
    PromoteFailed = 5,
    /// This node holds a strict lease for `token` until `valid_until_ns`.
    LeaseAcquired = 6,
    /// The lease of `token` now ends earlier, at `valid_until_ns`.
    LeaseShortened = 7,
    /// The lease of `token` is gone: stop acting as the only leader.
    LeaseLost = 8,
    /// A transfer to `node` completed.
    TransferCompleted = 9,
    /// This leader hands leadership back to `node`, a better-ranked voter.
    HandingBack = 10,
    /// A transfer to `node` failed.
    TransferFailed = 11,
    /// The membership this node acts on is now `epoch`.
    MembershipChanged = 12,
    /// The leader's membership change reached `epoch`.
    MembershipChangeCompleted = 13,
    /// A membership change failed.
    MembershipChangeFailed = 14,
    /// Peers saw this node use term `term`, above the one it restarted
    /// with: its state went back (a restored copy).
    RollbackSuspected = 15,
    /// Peer `node` disagrees about the membership.
    MembershipConflict = 16,
    /// An event this ABI does not name yet: read `description`.
    Other = 17,
}

/// An event. Fields a kind does not mention are zero.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TenureEvent {
    /// What happened.
    pub kind: TenureEventKind,
    /// The term the event is about.
    pub term: u64,
    /// The node the event names (a leader, a transfer target, a peer).
    pub node: u64,
    /// The leadership's token (became leader, lease events).
    pub token: TenureToken,
    /// When a lease ends, on the clock `now_ns` comes from.
    pub valid_until_ns: u64,
    /// A membership's epoch.
    pub epoch: u64,
    /// The whole event as text, for logs (NUL-terminated; valid until the
    /// next [`tenure_actions_next`] on this node).
    pub description: *const c_char,
}

/// One action, read with [`tenure_actions_next`]. Fields its kind does not
/// mention are zero or `NULL`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TenureAction {
    /// What to do.
    pub kind: TenureActionKind,
    /// `PERSIST`: the state to store.
    pub state: TenureHardState,
    /// `SEND`: the peer (`0` if only its address is known).
    pub to: u64,
    /// `SEND`: the datagram (valid until the next [`tenure_actions_next`]
    /// on this node).
    pub bytes: *const u8,
    /// `SEND`: its length.
    pub len: usize,
    /// `SEND`: the peer's address as `ip:port` text (NUL-terminated, valid
    /// as `bytes`).
    pub addr: *const c_char,
    /// `EVENT`: the event.
    pub event: TenureEvent,
    /// `PERSIST_MEMBERSHIP`: the id of the membership `bytes` holds.
    pub membership: TenureMembershipId,
}

/// A node's role ([`TenureStatus::role`]).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TenureRole {
    /// Follows the leader of its term (or waits for one).
    Follower = 0,
    /// Runs a pre-vote round, or waits for its term bump to be durable.
    PreCandidate = 1,
    /// Asks for votes.
    Candidate = 2,
    /// Won its term.
    Leader = 3,
}

/// A snapshot of a node ([`tenure_node_status`]).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TenureStatus {
    /// The node's id.
    pub id: u64,
    /// Its role.
    pub role: TenureRole,
    /// Its current term.
    pub term: u64,
    /// Its vote in that term (`0`: none).
    pub vote: u64,
    /// The leader it knows in that term (`0`: none).
    pub leader: u64,
    /// The state storage last confirmed.
    pub persisted: TenureHardState,
    /// Whether a persist action awaits its confirmation.
    pub write_in_flight: bool,
    /// Whether it is a voter.
    pub is_voter: bool,
    /// Whether it holds a strict lease (as of its latest `now`).
    pub has_lease: bool,
    /// When that lease ends.
    pub lease_valid_until_ns: u64,
    /// Whether it leads (and so has a token).
    pub has_token: bool,
    /// Its leadership's token.
    pub token: TenureToken,
    /// The membership it acts on.
    pub membership: TenureMembershipId,
}

/// A strict lease ([`tenure_node_lease`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct TenureLease {
    /// The leadership holding it.
    pub token: TenureToken,
    /// When it ends, on the clock `now_ns` comes from.
    pub valid_until_ns: u64,
}

/// Datagrams a node dropped, by reason ([`tenure_node_drops`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct TenureDrops {
    /// Not a valid frame.
    pub malformed: u64,
    /// Another cluster's.
    pub foreign_cluster: u64,
    /// Addressed to another node.
    pub misaddressed: u64,
    /// From an unknown sender, or not from its configured address.
    pub unknown_sender: u64,
    /// Messages that could not be framed.
    pub send_failed: u64,
    /// Untagged frames at a node with a key.
    pub unauthenticated: u64,
    /// Tagged with a key this node does not hold.
    pub unknown_key: u64,
    /// Tags that do not verify.
    pub bad_tag: u64,
    /// Replayed frames.
    pub replayed: u64,
    /// Frames of another run of this node or the sender.
    pub stale_session: u64,
}

/// A node, its framing and its pending actions. Thread-compatible: `Send`,
/// not `Sync` (one thread at a time).
pub struct TenureNode {
    engine: Engine,
    io: Io,
    /// Set while a call runs; still set after a call panicked.
    poisoned: bool,
}

/// The engine, with or without log positions, and its action buffer.
enum Engine {
    Plain(Box<Node<()>>, Vec<Action<()>>),
    Positioned(Box<Node<u64>>, Vec<Action<u64>>),
}

/// Everything but the engine.
struct Io {
    framing: Framing,
    /// Whose membership records this node writes.
    owner: StateOwner,
    known: Option<MembershipId>,
    peers: BTreeMap<NodeId, SocketAddr>,
    queue: VecDeque<Pending>,
    /// The action handed out last: it owns what its pointers point to.
    current: Option<Pending>,
}

/// A queued action and the bytes and text its pointers will point to.
struct Pending {
    action: TenureAction,
    bytes: Vec<u8>,
    text: Option<CString>,
}

impl Pending {
    fn new(kind: TenureActionKind) -> Pending {
        Pending {
            action: TenureAction {
                kind,
                state: TenureHardState::default(),
                to: 0,
                bytes: std::ptr::null(),
                len: 0,
                addr: std::ptr::null(),
                event: TenureEvent {
                    kind: TenureEventKind::Other,
                    term: 0,
                    node: 0,
                    token: TenureToken::default(),
                    valid_until_ns: 0,
                    epoch: 0,
                    description: std::ptr::null(),
                },
                membership: TenureMembershipId::default(),
            },
            bytes: Vec::new(),
            text: None,
        }
    }

    fn send(to: NodeId, bytes: Vec<u8>, addr: SocketAddr) -> Pending {
        let mut p = Pending::new(TenureActionKind::Send);
        p.action.to = to;
        p.bytes = bytes;
        p.text = CString::new(addr.to_string()).ok();
        p
    }

    fn event(event: &Event) -> Pending {
        use TenureEventKind as K;
        let mut p = Pending::new(TenureActionKind::Event);
        let e = &mut p.action.event;
        let lease = |e: &mut TenureEvent, kind, token: &tenure::FencingToken, until: Instant| {
            e.kind = kind;
            e.term = token.term;
            e.token = (*token).into();
            e.valid_until_ns = until.as_nanos();
        };
        match event {
            Event::BecameLeader { term, token, .. } => {
                (e.kind, e.term, e.node, e.token) =
                    (K::BecameLeader, *term, token.leader, (*token).into());
            }
            Event::SteppedDown { term, .. } => (e.kind, e.term) = (K::SteppedDown, *term),
            Event::LeaderChanged { term, leader } => {
                (e.kind, e.term, e.node) = (K::LeaderChanged, *term, leader.unwrap_or(0));
            }
            Event::CampaignStarted { term } => (e.kind, e.term) = (K::CampaignStarted, *term),
            Event::ConflictingLeader { term, claimed, .. } => {
                (e.kind, e.term, e.node) = (K::ConflictingLeader, *term, *claimed);
            }
            Event::PromoteFailed { .. } => e.kind = K::PromoteFailed,
            Event::LeaseAcquired {
                token, valid_until, ..
            } => {
                lease(e, K::LeaseAcquired, token, *valid_until);
            }
            Event::LeaseShortened {
                token, valid_until, ..
            } => {
                lease(e, K::LeaseShortened, token, *valid_until);
            }
            Event::LeaseLost { token, .. } => lease(e, K::LeaseLost, token, Instant::ZERO),
            Event::TransferCompleted { to } => (e.kind, e.node) = (K::TransferCompleted, *to),
            Event::HandingBack { to, .. } => (e.kind, e.node) = (K::HandingBack, *to),
            Event::TransferFailed { to, .. } => (e.kind, e.node) = (K::TransferFailed, *to),
            Event::MembershipChanged { epoch, .. } => {
                (e.kind, e.epoch) = (K::MembershipChanged, *epoch);
            }
            Event::MembershipChangeCompleted { epoch } => {
                (e.kind, e.epoch) = (K::MembershipChangeCompleted, *epoch);
            }
            Event::MembershipChangeFailed { .. } => e.kind = K::MembershipChangeFailed,
            Event::RollbackSuspected { seen, .. } => {
                (e.kind, e.term) = (K::RollbackSuspected, *seen)
            }
            Event::MembershipConflict { peer, .. } => {
                (e.kind, e.node) = (K::MembershipConflict, *peer)
            }
            _ => e.kind = K::Other,
        }
        p.text = CString::new(format!("{event:?}")).ok();
        p
    }
}

impl Io {
    /// Queues `actions` in order, framing every message with the stamp of
    /// the step that decided it; then follows the node's membership and
    /// queues the framing's hellos.
    fn queue<P: WirePosition>(&mut self, node: &Node<P>, actions: &mut Vec<Action<P>>) {
        for action in actions.drain(..) {
            let pending = match action {
                Action::Persist(state) => {
                    let mut p = Pending::new(TenureActionKind::Persist);
                    p.action.state = state.into();
                    p
                }
                Action::Send { to, message } => match self.framing.frame(to, &message) {
                    Some((bytes, addr)) => Pending::send(to, bytes, addr),
                    // Counted as `send_failed`; a lost message is tolerated.
                    None => continue,
                },
                Action::PersistMembership(membership) => {
                    let mut p = Pending::new(TenureActionKind::PersistMembership);
                    p.action.membership = membership.id().into();
                    p.bytes = encode_membership_record(self.owner, &membership);
                    p
                }
                Action::Event(event) => Pending::event(&event),
            };
            self.queue.push_back(pending);
        }
        follow_membership(node, &mut self.framing, &mut self.known);
        for (bytes, addr) in self.framing.take_control() {
            let to = self
                .peers
                .iter()
                .find(|(_, a)| **a == addr)
                .map_or(0, |(id, _)| *id);
            self.queue.push_back(Pending::send(to, bytes, addr));
        }
    }

    /// The input a datagram makes, or why it was dropped.
    ///
    /// # Safety
    /// `input.bytes` is `NULL` or holds `input.len` bytes; `input.from_addr`
    /// is `NULL` or NUL-terminated.
    unsafe fn receive<P: WirePosition>(
        &mut self,
        input: &TenureInput,
    ) -> Result<Option<Input<P>>, Failure> {
        // SAFETY: `tenure_node_step`'s contract: `len` bytes at `bytes`.
        let bytes = unsafe { slice(input.bytes, input.len, "input.bytes") }?;
        // SAFETY: as above: a NUL-terminated string.
        let addr = unsafe { text(input.from_addr, "input.from_addr") }?;
        let from_addr: SocketAddr = addr.parse().map_err(|e| {
            Failure::argument(format!("input.from_addr {addr:?} is not ip:port ({e})"))
        })?;
        let before = self.framing.drops;
        match self.framing.accept::<P>(bytes, from_addr) {
            Received::Message(from, message) => Ok(Some(self.framing.input(from, message))),
            Received::Wake | Received::Timeout => Ok(None),
            Received::Dropped => Err(dropped(&before, &self.framing.drops)),
        }
    }
}

/// The failure that names why a datagram was dropped: the counter that
/// moved.
fn dropped(before: &DropCounts, after: &DropCounts) -> Failure {
    let reason = before
        .by_reason()
        .iter()
        .zip(after.by_reason())
        .find(|(b, a)| b.1 != a.1)
        .map_or("dropped", |(_, a)| a.0);
    Failure::new(TenureCode::Dropped, format!("datagram dropped: {reason}"))
}

impl TenureNode {
    /// # Safety
    /// As [`Io::receive`] for `input`.
    unsafe fn step(&mut self, now: Instant, input: &TenureInput) -> Result<(), Failure> {
        let unpositioned = |_| {
            Err(Failure::argument(
                "a log position input at a node made without log positions (tenure_config_set_log_positions)",
            ))
        };
        // SAFETY: as this function's contract.
        unsafe {
            match &mut self.engine {
                Engine::Plain(node, out) => step(node, out, &mut self.io, now, input, unpositioned),
                Engine::Positioned(node, out) => step(node, out, &mut self.io, now, input, Ok),
            }
        }
    }
}

/// Feeds `input` to `node` and queues what follows.
///
/// # Safety
/// As [`Io::receive`] for `input`.
unsafe fn step<P: WirePosition>(
    node: &mut Node<P>,
    out: &mut Vec<Action<P>>,
    io: &mut Io,
    now: Instant,
    input: &TenureInput,
    position: impl FnOnce(u64) -> Result<P, Failure>,
) -> Result<(), Failure> {
    let input = match input.kind {
        0 => Input::Tick,
        // SAFETY: as this function's contract.
        1 => match unsafe { io.receive(input) }? {
            Some(input) => input,
            None => {
                // A hello: it may owe one back.
                io.queue(node, out);
                return Ok(());
            }
        },
        2 => Input::Persisted(input.state.into()),
        3 => Input::Promote,
        4 => Input::Demote,
        5 => Input::TransferLeadership { to: input.to },
        6 => Input::HandOver,
        7 => Input::LogPosition(position(input.position)?),
        8 => Input::PersistedMembership(input.membership.into()),
        // SAFETY: as this function's contract (`address`).
        9 => Input::ChangeMembership(unsafe { change(input) }?),
        other => return Err(Failure::argument(format!("{other} is not an input kind"))),
    };
    node.step_into(now, input, out);
    io.queue(node, out);
    Ok(())
}

/// The membership change `input` names.
///
/// # Safety
/// `input.address` is `NULL` or NUL-terminated.
unsafe fn change(input: &TenureInput) -> Result<MembershipChange, Failure> {
    let address = || {
        // SAFETY: as this function's contract.
        let text = unsafe { text(input.address, "input.address") }?;
        text.parse::<SocketAddr>().map_err(|e| {
            Failure::argument(format!("input.address {text:?} is not ip:port ({e})"))
        })?;
        Ok::<_, Failure>(text.to_string())
    };
    let (id, old) = (input.member, input.old);
    if id == 0 || (input.change == TenureChangeKind::Replace as u32 && old == 0) {
        return Err(Failure::argument("node id 0 means \"no node\""));
    }
    Ok(match input.change {
        0 => MembershipChange::AddVoter {
            id,
            address: address()?,
        },
        1 => MembershipChange::AddObserver {
            id,
            address: address()?,
        },
        2 => MembershipChange::Promote { id },
        3 => MembershipChange::Remove { id },
        4 => MembershipChange::Replace {
            old,
            new: id,
            address: address()?,
        },
        other => {
            return Err(Failure::argument(format!(
                "{other} is not a membership change kind"
            )));
        }
    })
}

/// Runs `body` on the node at `node`, refusing a node that panicked.
///
/// # Safety
/// `node` is `NULL` or a live node no other thread uses.
unsafe fn with_node(
    node: *mut TenureNode,
    err: *mut *mut TenureError,
    body: impl FnOnce(&mut TenureNode) -> Result<(), Failure>,
) -> TenureCode {
    guard(err, || {
        // SAFETY: as this function's contract.
        let node = unsafe { object(node, "node") }?;
        if node.poisoned {
            return Err(Failure::new(
                TenureCode::Panic,
                "this node panicked in an earlier call; free it",
            ));
        }
        node.poisoned = true;
        let result = body(node);
        node.poisoned = false;
        result
    })
}

/// Reads the node at `node`, if it is usable.
///
/// # Safety
/// `node` is `NULL` or a live node no other thread is changing.
unsafe fn read<T>(node: *const TenureNode, body: impl FnOnce(&TenureNode) -> T) -> Option<T> {
    catch(|| {
        // SAFETY: as this function's contract; it is only read.
        let node = unsafe { object(node.cast_mut(), "node") }?;
        if node.poisoned {
            return Err(Failure::new(TenureCode::Panic, "poisoned"));
        }
        Ok(body(node))
    })
    .ok()
}

/// A node from `config` (copied; free it when convenient), restarted from
/// `state` (what storage confirmed last; all zero for a node that never
/// ran), at `now_ns` on a monotonic clock that counts suspend
/// (`CLOCK_BOOTTIME` on Linux). Checks the configuration as Rust's
/// `Node::new` does; with a key, takes a new incarnation from the data
/// directory. `NULL` on failure, with `*err` set
/// (`TENURE_CODE_INVALID_CONFIG` names the setting; every other voter and
/// observer needs an address, from [`crate::tenure_config_add_peer`] or
/// the membership record).
///
/// The node may already have actions (hellos to its peers): drain them
/// with [`tenure_actions_next`] before waiting.
///
/// # Safety
/// `config` is `NULL` or a live configuration; `err` is `NULL` or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tenure_node_new(
    config: *const TenureConfig,
    state: TenureHardState,
    now_ns: u64,
    err: *mut *mut TenureError,
) -> *mut TenureNode {
    let made = catch(|| {
        // SAFETY: the caller promises a live configuration; it is only read.
        let c = unsafe { object(config.cast_mut(), "config") }?;
        let refused = |e: tenure::ConfigError| {
            Failure::new(
                TenureCode::InvalidConfig,
                format!("{e} (setting `{}`)", e.setting()),
            )
        };
        let now = Instant::from_nanos(now_ns);
        let id = c.config.id();
        let owner = StateOwner {
            node: id,
            cluster: c.cluster,
        };
        if let Some(found) = c.membership_owner.filter(|&found| found != owner) {
            return Err(Failure::new(
                TenureCode::BadState,
                format!("the membership record is {found}'s, not {owner}'s"),
            ));
        }
        let mut engine = if c.positions {
            let node = Node::new(c.config.clone(), state.into(), now).map_err(refused)?;
            Engine::Positioned(Box::new(node), Vec::new())
        } else {
            let node = Node::new(c.config.clone(), state.into(), now).map_err(refused)?;
            Engine::Plain(Box::new(node), Vec::new())
        };
        // The node sends only to addresses it knows: a member without one
        // would never hear from it, silently.
        let membership = c.config.effective_membership();
        let unreachable: Vec<String> = membership
            .members()
            .into_iter()
            .filter(|&m| m != id && !c.peers.contains_key(&m) && membership.address(m).is_none())
            .map(|m| m.to_string())
            .collect();
        if !unreachable.is_empty() {
            return Err(Failure::new(
                TenureCode::InvalidConfig,
                format!(
                    "no address for member {} (tenure_config_add_peer: every other voter and observer needs one) (setting `peers`)",
                    unreachable.join(", ")
                ),
            ));
        }
        let framing = match &c.keys {
            Some((ring, dir)) => {
                let auth = PeerAuth::for_data_dir(ring.clone(), dir).map_err(|e| {
                    Failure::new(
                        TenureCode::Io,
                        format!("incarnation in {}: {e}", dir.display()),
                    )
                })?;
                Framing::authenticated(id, c.cluster, c.peers.clone(), auth)
            }
            None => Framing::new(id, c.cluster, c.peers.clone()),
        };
        let mut io = Io {
            framing,
            owner,
            known: None,
            peers: c.peers.clone(),
            queue: VecDeque::new(),
            current: None,
        };
        match &mut engine {
            Engine::Plain(node, out) => io.queue(node, out),
            Engine::Positioned(node, out) => io.queue(node, out),
        }
        Ok(Box::into_raw(Box::new(TenureNode {
            engine,
            io,
            poisoned: false,
        })))
    });
    made.unwrap_or_else(|failure| {
        report(err, failure);
        std::ptr::null_mut()
    })
}

/// Frees a node (`NULL` is a no-op).
///
/// # Safety
/// `node` is `NULL` or a node from [`tenure_node_new`], freed only once;
/// no pointer an action gave stays in use.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tenure_node_free(node: *mut TenureNode) {
    if node.is_null() || !node.is_aligned() {
        return;
    }
    let _ = catch(|| {
        // SAFETY: the caller promises it came from `tenure_node_new`
        // (`Box::into_raw`) and is freed once.
        drop(unsafe { Box::from_raw(node) });
        Ok(())
    });
}

/// Feeds one input at `now_ns` (never earlier than a `now_ns` given
/// before; an earlier one counts as the latest). The actions it causes
/// join the node's queue behind those not yet read: read them with
/// [`tenure_actions_next`] and execute them in order. A datagram that is
/// not a message for this node returns `TENURE_CODE_DROPPED` (its message
/// names why) and changes nothing else.
///
/// # Safety
/// `node` is `NULL` or a live node no other thread uses; `input` is `NULL`
/// or points to an input whose `bytes` (if not `NULL`) holds `len` bytes
/// and whose `from_addr` (if not `NULL`) is NUL-terminated; `err` is
/// `NULL` or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tenure_node_step(
    node: *mut TenureNode,
    now_ns: u64,
    input: *const TenureInput,
    err: *mut *mut TenureError,
) -> TenureCode {
    // SAFETY: as this function's contract.
    unsafe {
        with_node(node, err, |n| {
            // SAFETY: the caller promises a valid input; it is only read.
            let input = object(input.cast_mut(), "input")?;
            // SAFETY: the caller promises its pointers are valid.
            n.step(Instant::from_nanos(now_ns), input)
        })
    }
}

/// Takes the next action into `*action`: `true` if there was one, `false`
/// when the queue is empty (or `node` or `action` is `NULL`). The
/// action's pointers (`bytes`, `addr`, `event.description`) stay valid
/// until the next call of this function on this node, or its free; steps
/// in between (e.g. feeding `PERSISTED`) do not move them.
///
/// # Safety
/// `node` is `NULL` or a live node no other thread uses; `action` is
/// `NULL` or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tenure_actions_next(
    node: *mut TenureNode,
    action: *mut TenureAction,
) -> bool {
    let mut found = false;
    // SAFETY: as this function's contract.
    let code = unsafe {
        with_node(node, std::ptr::null_mut(), |n| {
            let io = &mut n.io;
            io.current = io.queue.pop_front();
            let Some(current) = io.current.as_ref() else {
                return Ok(());
            };
            let mut out = current.action;
            let text = current
                .text
                .as_ref()
                .map_or(std::ptr::null(), |t| t.as_ptr());
            match out.kind {
                TenureActionKind::Send => {
                    (out.bytes, out.len, out.addr) =
                        (current.bytes.as_ptr(), current.bytes.len(), text);
                }
                TenureActionKind::PersistMembership => {
                    (out.bytes, out.len) = (current.bytes.as_ptr(), current.bytes.len());
                }
                TenureActionKind::Event => out.event.description = text,
                TenureActionKind::Persist => {}
            }
            // SAFETY: the caller promises `action` is writable.
            write(action, out, "action")?;
            found = true;
            Ok(())
        })
    };
    code == TenureCode::Ok && found
}

/// The next instant (in the `now_ns` clock) at which a tick has work to
/// do; [`TENURE_NO_DEADLINE`] when only an input can change anything (or
/// `node` is `NULL`). Ticking earlier is harmless.
///
/// # Safety
/// `node` is `NULL` or a live node no other thread is changing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tenure_node_next_deadline_ns(node: *const TenureNode) -> u64 {
    // SAFETY: as this function's contract.
    unsafe {
        read(node, |n| {
            let deadline = match &n.engine {
                Engine::Plain(node, _) => node.next_deadline(),
                Engine::Positioned(node, _) => node.next_deadline(),
            };
            deadline.map_or(TENURE_NO_DEADLINE, Instant::as_nanos)
        })
    }
    .unwrap_or(TENURE_NO_DEADLINE)
}

/// Writes a snapshot of the node to `*status`.
///
/// # Safety
/// `node` is `NULL` or a live node no other thread is changing; `status`
/// is `NULL` or writable; `err` is `NULL` or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tenure_node_status(
    node: *const TenureNode,
    status: *mut TenureStatus,
    err: *mut *mut TenureError,
) -> TenureCode {
    guard(err, || {
        // SAFETY: as this function's contract.
        let s = unsafe { read(node, |n| snapshot(&n.engine)) }
            .ok_or_else(|| Failure::null("node (or it panicked before)"))?;
        // SAFETY: the caller promises `status` is writable.
        unsafe { write(status, s, "status") }
    })
}

fn snapshot(engine: &Engine) -> TenureStatus {
    let s = match engine {
        Engine::Plain(node, _) => node.status(),
        Engine::Positioned(node, _) => node.status(),
    };
    let role = match s.role {
        Role::Leader => TenureRole::Leader,
        Role::Candidate => TenureRole::Candidate,
        Role::PreCandidate => TenureRole::PreCandidate,
        // A role added later reads as following until this ABI names it.
        _ => TenureRole::Follower,
    };
    TenureStatus {
        id: s.id,
        role,
        term: s.term,
        vote: s.vote.unwrap_or(0),
        leader: s.leader.unwrap_or(0),
        persisted: s.persisted.into(),
        write_in_flight: s.write_in_flight,
        is_voter: s.is_voter,
        has_lease: s.lease_until.is_some(),
        lease_valid_until_ns: s.lease_until.map_or(0, Instant::as_nanos),
        has_token: s.fencing_token.is_some(),
        token: s.fencing_token.map(Into::into).unwrap_or_default(),
        membership: s.membership.id().into(),
    }
}

/// Whether the node holds a strict lease at `now_ns`; if so, and `lease`
/// is not `NULL`, writes it. Ask before every act as the only leader;
/// under soft fencing there is never a lease.
///
/// # Safety
/// `node` is `NULL` or a live node no other thread is changing; `lease` is
/// `NULL` or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tenure_node_lease(
    node: *const TenureNode,
    now_ns: u64,
    lease: *mut TenureLease,
) -> bool {
    // SAFETY: as this function's contract.
    let held = unsafe {
        read(node, |n| {
            let now = Instant::from_nanos(now_ns);
            match &n.engine {
                Engine::Plain(node, _) => node.lease(now),
                Engine::Positioned(node, _) => node.lease(now),
            }
        })
    }
    .flatten();
    let Some(held) = held else {
        return false;
    };
    if !lease.is_null() {
        let out = TenureLease {
            token: held.token.into(),
            valid_until_ns: held.valid_until.as_nanos(),
        };
        // SAFETY: the caller promises `lease` is writable.
        if unsafe { write(lease, out, "lease") }.is_err() {
            return false;
        }
    }
    true
}

/// Whether the node leads; if so, and `token` is not `NULL`, writes its
/// leadership's token (attach it to the writes it makes as leader).
///
/// # Safety
/// `node` is `NULL` or a live node no other thread is changing; `token` is
/// `NULL` or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tenure_node_token(
    node: *const TenureNode,
    token: *mut TenureToken,
) -> bool {
    // SAFETY: as this function's contract.
    let Some(status) = (unsafe { read(node, |n| snapshot(&n.engine)) }) else {
        return false;
    };
    if !status.has_token {
        return false;
    }
    // SAFETY: the caller promises `token` is writable.
    token.is_null() || unsafe { write(token, status.token, "token") }.is_ok()
}

/// Whether a replica beside this node may take a write made under
/// `token`: its term is at least this node's term, and in this term it
/// names the leader this node knows. `false` for a `NULL` node.
///
/// # Safety
/// `node` is `NULL` or a live node no other thread is changing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tenure_node_admits(node: *const TenureNode, token: TenureToken) -> bool {
    // SAFETY: as this function's contract.
    unsafe {
        read(node, |n| match &n.engine {
            Engine::Plain(node, _) => node.admits(token.into()),
            Engine::Positioned(node, _) => node.admits(token.into()),
        })
    }
    .unwrap_or(false)
}

/// Writes the counts of datagrams the node dropped, by reason.
///
/// # Safety
/// `node` is `NULL` or a live node no other thread is changing; `drops` is
/// `NULL` or writable; `err` is `NULL` or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tenure_node_drops(
    node: *const TenureNode,
    drops: *mut TenureDrops,
    err: *mut *mut TenureError,
) -> TenureCode {
    guard(err, || {
        // SAFETY: as this function's contract.
        let d = unsafe { read(node, |n| n.io.framing.drops) }
            .ok_or_else(|| Failure::null("node (or it panicked before)"))?;
        let out = TenureDrops {
            malformed: d.malformed,
            foreign_cluster: d.foreign_cluster,
            misaddressed: d.misaddressed,
            unknown_sender: d.unknown_sender,
            send_failed: d.send_failed,
            unauthenticated: d.unauthenticated,
            unknown_key: d.unknown_key,
            bad_tag: d.bad_tag,
            replayed: d.replayed,
            stale_session: d.stale_session,
        };
        // SAFETY: the caller promises `drops` is writable.
        unsafe { write(drops, out, "drops") }
    })
}
