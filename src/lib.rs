//! # tenure
//!
//! A sans-IO, Raft-style **leader election and fencing engine**. Systems that
//! have their own replication embed it to decide who leads, without two
//! leaders acting at once.
//!
//! The core, [`Node`], is a pure state machine: no clocks, sockets, files,
//! threads, async or global randomness. Time arrives as `now` on every call,
//! randomness comes from a seeded PRNG in the [`Config`], and the same
//! configuration and inputs always produce the same actions.
//!
//! ## The run loop
//!
//! A driver owns the I/O and repeats: receive → step → persist → ack →
//! send → sleep until [`Node::next_deadline`]. Here three nodes run in
//! memory with a synchronous "disk" and a perfect network:
//!
//! ```
//! use std::collections::VecDeque;
//! use tenure::{Action, Config, Event, HardState, Input, Instant, Node, Role};
//!
//! let ids = [1, 2, 3];
//! let mut nodes: Vec<Node> = ids
//!     .iter()
//!     .map(|&id| {
//!         let config = Config::new(id, ids).rng_seed(42);
//!         // A fresh node starts from the default state; a restarted node
//!         // from what its storage confirmed last.
//!         Node::new(config, HardState::default(), Instant::ZERO).unwrap()
//!     })
//!     .collect();
//! let mut disk = [HardState::default(); 3];
//! let mut network: VecDeque<(u64, u64, tenure::Message)> = VecDeque::new();
//! let mut now = Instant::ZERO;
//! let mut actions = Vec::new();
//!
//! for _ in 0..100 {
//!     // Sleep until the earliest deadline, then tick every node that is due.
//!     now = nodes.iter().filter_map(|n| n.next_deadline()).min().unwrap();
//!     for node in nodes.iter_mut() {
//!         if node.next_deadline().is_some_and(|d| d <= now) {
//!             node.step_into(now, Input::Tick, &mut actions);
//!             network.extend(drain(node.id(), &mut actions, &mut disk, node, now));
//!         }
//!     }
//!     // Deliver messages (instantly, in order) until the network is quiet.
//!     while let Some((from, to, message)) = network.pop_front() {
//!         let node = &mut nodes[(to - 1) as usize];
//!         node.step_into(now, Input::Receive { from, message }, &mut actions);
//!         network.extend(drain(to, &mut actions, &mut disk, node, now));
//!     }
//!     if nodes.iter().any(|n| n.status().role == Role::Leader) {
//!         break;
//!     }
//! }
//!
//! /// Executes actions in order. Persist is written "durably", then
//! /// acknowledged; the engine releases the sends that waited for it.
//! fn drain(
//!     id: u64,
//!     actions: &mut Vec<Action>,
//!     disk: &mut [HardState; 3],
//!     node: &mut Node,
//!     now: Instant,
//! ) -> Vec<(u64, u64, tenure::Message)> {
//!     let mut sends = Vec::new();
//!     while !actions.is_empty() {
//!         for action in std::mem::take(actions) {
//!             match action {
//!                 Action::Persist(state) => {
//!                     disk[(id - 1) as usize] = state; // fsync here
//!                     node.step_into(now, Input::Persisted(state), actions);
//!                 }
//!                 Action::Send { to, message } => sends.push((id, to, message)),
//!                 Action::PersistMembership(membership) => {
//!                     // Store it beside the HardState, fsync, then confirm
//!                     // it. A cluster that changes its membership also
//!                     // stamps frames (`Input::ReceiveStamped`): see the
//!                     // book's "Membership in your own loop"
//!                     // (docs/src/embedding.md).
//!                     let stored = Input::PersistedMembership(membership.id());
//!                     node.step_into(now, stored, actions);
//!                 }
//!                 Action::Event(Event::BecameLeader { term, .. }) => {
//!                     println!("node {id} leads term {term}");
//!                 }
//!                 Action::Event(_) => {}
//!             }
//!         }
//!     }
//!     sends
//! }
//!
//! let leaders: Vec<_> = nodes.iter().filter(|n| n.status().role == Role::Leader).collect();
//! assert_eq!(leaders.len(), 1);
//! let term = leaders[0].status().term;
//! // Every node knows the leader and has the term on disk.
//! assert!(nodes.iter().all(|n| n.status().leader == Some(leaders[0].id())));
//! assert!(disk.iter().all(|d| d.term == term));
//! ```
//!
//! ## Rules and where they live
//!
//! Every rule is a variant of [`Rule`]; its [`Rule::name`] appears in the
//! rule's doc comment, in the `rule` key of every log line that applies it,
//! and in the names of the tests that check it (`<rule>_<behaviour>`), and
//! [`Rule::decided_in`] names the file that decides it
//! (`tests/core/rule_coverage.rs` fails when a rule is not logged there or has
//! no such test): `src/node/durable.rs` (persistence), `election.rs`
//! (terms, pre-vote, votes), `leadership.rs` (following, heartbeats,
//! acknowledgements, step-down), `lease.rs` (fencing math), `handover.rs`
//! (promote, demote, transfer, `TimeoutNow`), `membership.rs` (the
//! durable membership and the leader's changes to it; the design and its
//! safety argument are in the [`membership`] module), `rank.rs` (who
//! campaigns first and hand-back under a rank policy; the policies and
//! their trade-offs are in the [`rank`] module), `rollback.rs` (a node
//! restarted from an older copy of its state learns the terms it forgot),
//! `timers.rs` (the timer table), `mod.rs` (start-up and time).
//!
//! ## Log keys
//!
//! Every decision is one slog line at `info` or above (per-message noise at
//! `debug`, compiled out of release builds by slog's default features) with
//! the logger's `node` and these keys; `tests/core/rule_coverage.rs` fails when
//! the core logs a key that is not listed here.
//!
//! | key | meaning |
//! |---|---|
//! | `rule` | the [`Rule`] that decided (its name) |
//! | `term` | the node's current term when it decided |
//! | `timer` | the timer that fired (`step_down`, `lease_end`, `restart_probe`, `leader_death`, `transfer`, `promotion`, `election_round`, `campaign`, `heartbeat`) |
//! | `from`, `to` | the peer a message came from or goes to |
//! | `leader`, `known`, `claimed` | a leader id; the known and the second claimant of one term |
//! | `proposed`, `new_term`, `request_term`, `message_term` | terms named by a message |
//! | `vote`, `votes`, `granted`, `quorum` | this node's vote; grants counted; the quorum |
//! | `reason` | why a request was refused, or a failure's reason |
//! | `transfer`, `role`, `mode` | a vote request's transfer flag; the node's role and mode |
//! | `seq`, `newest` | a heartbeat round; the newest seen |
//! | `peers` | how many peers a message went to |
//! | `promise`, `death_timeout`, `fastest_heartbeat` | a voter's stated promise; this node's timing |
//! | `deadline`, `retry_at`, `last_heard`, `no_votes_until`, `sent` | instants the decision is about |
//! | `restarted_at` | the durable term a node started with |
//! | `step_down`, `step_down_was`, `lease`, `lease_was` | a leader's fencing anchors after and before its voter sets changed |
//! | `given`, `latest` | a `now` that went backwards, and the latest seen |
//! | `state`, `acked`, `in_flight`, `needs`, `message` | durable states and a held message |
//! | `epoch`, `membership_term`, `voters`, `outgoing`, `observers` | a membership: its epoch, the term that made it, its voter sets |
//! | `mine`, `theirs`, `change` | two conflicting membership ids; a membership change request |
//! | `place`, `delay`, `successors`, `ready`, `failures` | a node's rank place and campaign delay; the leader's standings (best rank first); a follower's hand-back readiness; failed hand-backs to one voter in a row |
//!
//! ## Fencing
//!
//! With [`Fencing::Strict`], [`Node::lease`] proves that no other node can be
//! leader until the returned instant, given a bound on clock-rate drift; the
//! argument is in the docs of [`Node::lease`]. Under the default
//! [`Fencing::Soft`] there is no lease (`lease(now)` is always `None`):
//! leases and lease-guarded local reads need strict fencing.
//!
//! The write path:
//!
//! 1. Before acting as leader (accepting a write, running the singleton
//!    job), ask [`Node::lease(now)`](Node::lease). `None` means "you may
//!    not act as the only leader right now": refuse or redirect.
//! 2. Attach the lease's [`FencingToken`] to the write.
//! 3. The storage that applies writes keeps a [`Fence`] (persisted with the
//!    data it guards) and calls [`Fence::check`] on every write's token. A
//!    token older than one already seen is rejected, so a deposed leader
//!    that was paused past its lease cannot overwrite its successor's work.
//! 4. A *replica* (a follower's copy of replicated data) checks more: with
//!    [`Fence::admit`] it also refuses a token older than its own node's
//!    current term ([`Node::admits`], [`Status::admits`] and the drivers'
//!    `Handle::admits` answer the same question). A replica that voted in
//!    term 2 may have elected a leader that has not written yet, so its
//!    fence has seen no term-2 token: the highest-token check alone would
//!    take the deposed term-1 leader's late write, and that leader could
//!    count it as held by a quorum the new leader does not have (Raft:
//!    "reply false if term < currentTerm").
//! 5. A new leader writes once (a barrier: an empty entry of its term) when
//!    it gains leadership ([`Event::BecameLeader`], or
//!    [`Event::LeaseAcquired`] under strict fencing), so every replica's
//!    fence moves to its token before the first real write.
//!
//! A replica orders its steps so that no vote slips between them: check
//! with [`Fence::admit`] against the current term, make the write durable,
//! report the new log position to the node ([`Input::LogPosition`]; with a
//! driver, `Handle::set_position` then `Handle::sync`, which returns once
//! the driver took it), then check the term again before acknowledging. A
//! vote cast before the second check is seen by it (no acknowledgement goes
//! out); one cast after it is decided with the new position, so the
//! candidate it elects holds the write.
//!
//! The lease bounds the window with a clock-drift argument; the token
//! closes the rest (pauses, slow disks, late packets), which no clock can
//! bound.
//!
//! ## Features
//! - `std` (default): `std::error::Error` for errors, std support in slog.
//! - `serde` (default): serde derives on messages and durable state.
//! - `sim`: the `sim` module, a deterministic cluster simulator.
//! - `adapters`: the `adapters` module: wire codec, crash-safe file storage,
//!   UDP transport, the std driver and the TOML node configuration.
//! - `tokio`: the tokio driver.
//!
//! The `tenure` binary is the separate `tenure-cli` package (the `cli/`
//! workspace member), so a library build never compiles its dependencies.
//!
//! Without default features the crate is `no_std` + `alloc`.

#![cfg_attr(not(feature = "std"), no_std)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![warn(unreachable_pub)]

extern crate alloc;

#[cfg(feature = "adapters")]
#[cfg_attr(docsrs, doc(cfg(feature = "adapters")))]
pub mod adapters;
mod config;
mod fence;
mod hard_state;
pub mod host;
pub mod membership;
mod message;
mod node;
mod position;
mod quorum;
pub mod rank;
mod rng;
mod rule;
#[cfg(feature = "sim")]
#[cfg_attr(docsrs, doc(cfg(feature = "sim")))]
pub mod sim;
mod status;
mod time;

pub use config::{Config, ConfigError, Fencing, Millis, Mode, Setting};
pub use fence::{Fence, FencingToken, Lease, StaleToken, WriteRefused};
pub use hard_state::HardState;
pub use membership::{Membership, MembershipChange, MembershipFailure, MembershipId};
pub use message::{MAX_TERM_JUMP, Message, MessageKind};
pub use node::{Action, Input, Node};
pub use position::{LogPosition, VClock};
pub use rank::{Rank, RankPolicy};
pub use rule::Rule;
pub use status::{
    Event, HandBackReason, PromoteFailure, Refusals, Role, Status, StepDownReason, TransferFailure,
};
pub use time::Instant;

/// Identifies a node. `0` is never a valid id.
pub type NodeId = u64;

// The README's Rust examples are compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

// So are the book's (docs/src; cli/tests/examples.rs checks that every
// page with a Rust example is listed here).
#[cfg(doctest)]
#[doc = include_str!("../docs/src/embedding.md")]
#[doc = include_str!("../docs/src/fencing.md")]
#[doc = include_str!("../docs/src/priorities.md")]
struct BookDoctests;
