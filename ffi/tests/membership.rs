//! Membership changes and rank through the C ABI: three nodes in one
//! process, their datagrams routed between them at once, their durable
//! writes kept in memory, virtual time.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ffi::{CStr, CString};
use std::ptr::{null, null_mut};

use tenure_ffi::*;

mod common;
use common::take;

const CLUSTER: u64 = 7;
const MS: u64 = 1_000_000;

fn addr(id: u64) -> CString {
    CString::new(format!("127.0.0.1:{}", 7000 + id)).unwrap()
}

fn input(kind: TenureInputKind) -> TenureInput {
    // SAFETY: every field of `TenureInput` is valid zeroed (NULL pointers,
    // zero numbers).
    let mut input = unsafe { std::mem::zeroed::<TenureInput>() };
    input.kind = kind as u32;
    input
}

/// What the cluster's program made durable and was told, per node.
#[derive(Default)]
struct Disk {
    state: TenureHardState,
    /// The last membership record stored, and its id.
    membership: Option<(Vec<u8>, TenureMembershipId)>,
    /// The last membership stored but not acknowledged (`Cluster::hold`).
    unacknowledged: Option<TenureMembershipId>,
}

struct Cluster {
    voters: Vec<u64>,
    priorities: Vec<(u64, u32)>,
    nodes: BTreeMap<u64, *mut TenureNode>,
    disks: BTreeMap<u64, Disk>,
    /// Datagrams in flight: (from, to address, bytes).
    wire: VecDeque<(u64, String, Vec<u8>)>,
    /// Events seen: (node, kind, term, node the event names).
    events: Vec<(u64, TenureEventKind, u64, u64)>,
    /// Nodes whose program stores a membership record but has not yet fed
    /// `PERSISTED_MEMBERSHIP` (it may crash before it does).
    hold: BTreeSet<u64>,
    now: u64,
}

impl Cluster {
    fn new(voters: &[u64], priorities: &[(u64, u32)]) -> Cluster {
        let mut c = Cluster {
            voters: voters.to_vec(),
            priorities: priorities.to_vec(),
            nodes: BTreeMap::new(),
            disks: BTreeMap::new(),
            wire: VecDeque::new(),
            events: Vec::new(),
            hold: BTreeSet::new(),
            now: 1_000 * MS,
        };
        for &id in voters {
            c.start(id, None).unwrap();
        }
        c
    }

    /// A configuration for `id`: the voters, their addresses, 50 ms
    /// heartbeats, a 200 ms death timeout, the priorities (policy
    /// `PRIORITY` if any), and `membership` if given.
    fn config(&self, id: u64, membership: Option<&[u8]>) -> Result<*mut TenureConfig, String> {
        let mut err = null_mut();
        // SAFETY: the slices and strings live across the calls; `err` is
        // writable.
        unsafe {
            let c = tenure_config_new(id, self.voters.as_ptr(), self.voters.len());
            let mut ok = tenure_config_set_cluster_id(c, CLUSTER, &mut err) == TenureCode::Ok
                && tenure_config_set_heartbeat_ms(c, 50, &mut err) == TenureCode::Ok
                && tenure_config_set_death_timeout_ms(c, 200, &mut err) == TenureCode::Ok
                && tenure_config_set_seed(c, id, &mut err) == TenureCode::Ok;
            for &peer in self.voters.iter().filter(|&&p| p != id) {
                ok &= tenure_config_add_peer(c, peer, addr(peer).as_ptr(), &mut err)
                    == TenureCode::Ok;
            }
            if !self.priorities.is_empty() {
                ok &= tenure_config_set_rank_policy(c, TenureRankPolicy::Priority as u32, &mut err)
                    == TenureCode::Ok;
            }
            for &(member, priority) in &self.priorities {
                ok &= tenure_config_set_priority(c, member, priority, &mut err) == TenureCode::Ok;
            }
            if let Some(record) = membership {
                ok &= tenure_config_set_membership(c, record.as_ptr(), record.len(), &mut err)
                    == TenureCode::Ok;
            }
            if !ok {
                tenure_config_free(c);
                return Err(take(&mut err).1);
            }
            Ok(c)
        }
    }

    /// Starts (or restarts) `id` from its disk, with `membership` if given.
    fn start(&mut self, id: u64, membership: Option<&[u8]>) -> Result<(), (TenureCode, String)> {
        let c = self
            .config(id, membership)
            .map_err(|m| (TenureCode::InvalidArgument, m))?;
        let state = self.disks.entry(id).or_default().state;
        let mut err = null_mut();
        // SAFETY: `c` is live until freed here; `err` is writable.
        let node = unsafe { tenure_node_new(c, state, self.now, &mut err) };
        // SAFETY: `c` came from `tenure_config_new`, freed once.
        unsafe { tenure_config_free(c) };
        if node.is_null() {
            return Err(take(&mut err));
        }
        if let Some(old) = self.nodes.insert(id, node) {
            // SAFETY: the node this one replaces, freed once.
            unsafe { tenure_node_free(old) };
        }
        self.drain(id);
        Ok(())
    }

    fn step(&mut self, id: u64, input: &TenureInput) -> TenureCode {
        let mut err = null_mut();
        // SAFETY: a live node; the input's pointers are valid for the call.
        let code = unsafe { tenure_node_step(self.nodes[&id], self.now, input, &mut err) };
        if !err.is_null() {
            take(&mut err);
        }
        code
    }

    /// Executes `id`'s actions in order: writes are durable at once.
    fn drain(&mut self, id: u64) {
        let node = self.nodes[&id];
        // SAFETY: a zeroed action is valid; its pointers are read before
        // the next `tenure_actions_next` on this node.
        unsafe {
            let mut a = std::mem::zeroed::<TenureAction>();
            while tenure_actions_next(node, &mut a) {
                match a.kind {
                    TenureActionKind::Persist => {
                        self.disks.get_mut(&id).unwrap().state = a.state;
                        let mut done = input(TenureInputKind::Persisted);
                        done.state = a.state;
                        assert_eq!(self.step(id, &done), TenureCode::Ok);
                    }
                    TenureActionKind::PersistMembership => {
                        let record = std::slice::from_raw_parts(a.bytes, a.len).to_vec();
                        let disk = self.disks.get_mut(&id).unwrap();
                        disk.membership = Some((record, a.membership));
                        if self.hold.contains(&id) {
                            disk.unacknowledged = Some(a.membership);
                            continue;
                        }
                        let mut done = input(TenureInputKind::PersistedMembership);
                        done.membership = a.membership;
                        assert_eq!(self.step(id, &done), TenureCode::Ok);
                    }
                    TenureActionKind::Send => {
                        let to = CStr::from_ptr(a.addr).to_string_lossy().into_owned();
                        let bytes = std::slice::from_raw_parts(a.bytes, a.len).to_vec();
                        self.wire.push_back((id, to, bytes));
                    }
                    TenureActionKind::Event => {
                        let e = a.event;
                        self.events.push((id, e.kind, e.term, e.node));
                    }
                }
            }
        }
    }

    /// Runs every node until `ms` of virtual time passed.
    fn run(&mut self, ms: u64) {
        let end = self.now + ms * MS;
        loop {
            while let Some((from, to, bytes)) = self.wire.pop_front() {
                let Some((&id, _)) = self
                    .nodes
                    .iter()
                    .find(|(id, _)| addr(**id).to_str().unwrap() == to)
                else {
                    continue;
                };
                let source = addr(from);
                let mut datagram = input(TenureInputKind::Receive);
                (datagram.bytes, datagram.len, datagram.from_addr) =
                    (bytes.as_ptr(), bytes.len(), source.as_ptr());
                // A datagram that is not for `id` is dropped: fine here.
                self.step(id, &datagram);
                self.drain(id);
            }
            let ids: Vec<u64> = self.nodes.keys().copied().collect();
            let next = ids
                .iter()
                // SAFETY: live nodes.
                .map(|id| unsafe { tenure_node_next_deadline_ns(self.nodes[id]) })
                .min()
                .unwrap_or(TENURE_NO_DEADLINE);
            if next > end {
                self.now = end;
                return;
            }
            self.now = self.now.max(next);
            for id in ids {
                // SAFETY: a live node.
                if unsafe { tenure_node_next_deadline_ns(self.nodes[&id]) } <= self.now {
                    assert_eq!(self.step(id, &input(TenureInputKind::Tick)), TenureCode::Ok);
                    self.drain(id);
                }
            }
        }
    }

    fn status(&self, id: u64) -> TenureStatus {
        let mut err = null_mut();
        // SAFETY: a zeroed status is valid; a live node.
        unsafe {
            let mut s = std::mem::zeroed::<TenureStatus>();
            assert_eq!(
                tenure_node_status(self.nodes[&id], &mut s, &mut err),
                TenureCode::Ok
            );
            s
        }
    }

    /// The node every running node follows, once there is one.
    fn leader(&mut self) -> u64 {
        for _ in 0..40 {
            self.run(50);
            let leaders: Vec<u64> = self
                .nodes
                .keys()
                .map(|&id| self.status(id).leader)
                .collect();
            if leaders[0] != 0 && leaders.iter().all(|&l| l == leaders[0]) {
                return leaders[0];
            }
        }
        panic!("no leader within 2 s of virtual time");
    }
}

impl Cluster {
    /// Removes `removed` through `CHANGE_MEMBERSHIP` at `at`; the code the
    /// step returned.
    fn remove(&mut self, at: u64, removed: u64) -> TenureCode {
        let mut change = input(TenureInputKind::ChangeMembership);
        (change.change, change.member) = (TenureChangeKind::Remove as u32, removed);
        let code = self.step(at, &change);
        self.drain(at);
        code
    }

    /// Feeds `PERSISTED_MEMBERSHIP` of `membership` to `id`.
    fn persisted_membership(&mut self, id: u64, membership: TenureMembershipId) {
        let mut done = input(TenureInputKind::PersistedMembership);
        done.membership = membership;
        assert_eq!(self.step(id, &done), TenureCode::Ok);
        self.drain(id);
    }

    /// How many events of `kind` node `id` told.
    fn count(&self, id: u64, kind: TenureEventKind) -> usize {
        self.events
            .iter()
            .filter(|&&(node, k, ..)| node == id && k == kind)
            .count()
    }

    /// No term in which two nodes announced winning.
    fn assert_one_leader_per_term(&self) {
        let mut won: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
        for &(id, kind, term, _) in &self.events {
            if kind == TenureEventKind::BecameLeader {
                won.entry(term).or_default().insert(id);
            }
        }
        for (term, leaders) in won {
            assert_eq!(leaders.len(), 1, "term {term}: {leaders:?}");
        }
    }
}

/// Of nodes 1, 2 and 3 led by `leader`: the one to remove and the one kept.
fn removed_and_kept(leader: u64) -> (u64, u64) {
    let removed = if leader == 3 { 2 } else { 3 };
    (removed, 6 - leader - removed)
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for (_, node) in std::mem::take(&mut self.nodes) {
            // SAFETY: each node freed once.
            unsafe { tenure_node_free(node) };
        }
    }
}

/// A voter removed through `CHANGE_MEMBERSHIP` at the leader: every member
/// stores the new membership's record (`PERSIST_MEMBERSHIP`), the change
/// completes, and a member restarted from its record
/// (`tenure_config_set_membership`) acts on that membership.
///
/// Guards against: a C program that cannot store or restore a membership,
/// left on its bootstrap voters after a change.
#[test]
fn membership_change_through_the_abi_completes_and_survives_a_restart() {
    let mut c = Cluster::new(&[1, 2, 3], &[]);
    let leader = c.leader();
    let before = c.status(leader).membership;
    let (removed, kept) = removed_and_kept(leader);
    assert_eq!(c.remove(leader, removed), TenureCode::Ok);
    c.run(1_000);
    assert_eq!(
        c.count(leader, TenureEventKind::MembershipChangeCompleted),
        1,
        "the change did not complete: {:?}",
        c.events
    );
    let (record, stored) = c.disks[&kept].membership.clone().expect("a stored record");
    assert!(stored.epoch > before.epoch, "{stored:?} after {before:?}");
    assert_eq!(c.status(kept).membership, stored);
    assert_eq!(c.status(leader).membership, stored);

    // Restarted from its state and its record, it acts on that membership.
    c.start(kept, Some(&record)).unwrap();
    assert_eq!(c.status(kept).membership, stored);
    c.run(1_000);
    assert_eq!(c.status(kept).leader, c.status(leader).leader);

    // Another node's record is refused when the node is made; a damaged
    // one when it is given.
    assert_eq!(
        c.start(leader, Some(&record)).unwrap_err().0,
        TenureCode::BadState
    );
    let mut damaged = record.clone();
    *damaged.last_mut().unwrap() ^= 1;
    let err = c.config(kept, Some(&damaged)).unwrap_err();
    assert!(err.starts_with("membership record: "), "{err}");
}

/// A change naming no node, an unknown kind, or an address that is not
/// `ip:port` is the caller's error, and changes nothing.
#[test]
fn membership_change_inputs_are_checked() {
    let mut c = Cluster::new(&[1, 2, 3], &[]);
    let leader = c.leader();
    let bad_address = CString::new("not an address").unwrap();
    let mut cases = Vec::new();
    let mut add = input(TenureInputKind::ChangeMembership);
    (add.change, add.member, add.address) =
        (TenureChangeKind::AddVoter as u32, 4, bad_address.as_ptr());
    cases.push(add);
    let mut no_address = add;
    no_address.address = null();
    cases.push(no_address);
    let mut unknown = add;
    unknown.change = 77;
    cases.push(unknown);
    let mut nobody = input(TenureInputKind::ChangeMembership);
    nobody.change = TenureChangeKind::Remove as u32;
    cases.push(nobody);
    for case in cases {
        let code = c.step(leader, &case);
        assert!(
            matches!(code, TenureCode::InvalidArgument | TenureCode::NullPointer),
            "{code:?}"
        );
    }
    let before = c.status(leader).membership;
    c.run(500);
    assert_eq!(c.status(leader).membership, before);
}

/// Under `TENURE_RANK_POLICY_PRIORITY` the voter with the highest priority
/// ends up leading, whoever won first.
///
/// Guards against: rank settings that the ABI accepts but the engine never
/// sees.
#[test]
fn rank_priority_through_the_abi_makes_the_highest_priority_voter_lead() {
    let mut c = Cluster::new(&[1, 2, 3], &[(1, 1), (2, 5), (3, 1)]);
    c.leader();
    c.run(3_000);
    assert_eq!(c.leader(), 2, "events: {:?}", c.events);
}

/// `PERSISTED_MEMBERSHIP` naming a membership that no
/// `PERSIST_MEMBERSHIP` handed out (a later epoch, another leader's term,
/// nothing) counts for nothing: the change waits for the real one.
///
/// Guards against: a C program's stale or mistyped acknowledgement making
/// a membership count as durable on a node that never stored it.
#[test]
fn membership_persisted_with_an_id_never_handed_out_completes_no_change() {
    let mut c = Cluster::new(&[1, 2, 3], &[]);
    let leader = c.leader();
    let (removed, kept) = removed_and_kept(leader);
    c.hold.insert(kept);
    assert_eq!(c.remove(leader, removed), TenureCode::Ok);
    c.run(100);
    let real = c.disks[&kept]
        .unacknowledged
        .expect("the new membership stored");
    let wrong = [
        TenureMembershipId {
            epoch: real.epoch + 1,
            ..real
        },
        TenureMembershipId {
            term: real.term + 1,
            ..real
        },
        TenureMembershipId {
            fingerprint: real.fingerprint ^ 1,
            ..real
        },
        TenureMembershipId::default(),
    ];
    for id in wrong {
        c.persisted_membership(kept, id);
        c.run(50);
    }
    let done = TenureEventKind::MembershipChangeCompleted;
    assert_eq!(c.count(leader, done), 0, "{:?}", c.events);
    assert_ne!(c.status(kept).membership, real);
    // The real acknowledgement, before the change times out, completes it.
    c.hold.clear();
    c.persisted_membership(kept, real);
    c.run(1_000);
    assert_eq!(c.count(leader, done), 1, "{:?}", c.events);
    let (_, stored) = c.disks[&kept].membership.clone().unwrap();
    assert!(stored.epoch > real.epoch, "{stored:?} after {real:?}");
    assert_eq!(c.status(kept).membership, stored);
}

/// A change asked of a follower fails with `MEMBERSHIP_CHANGE_FAILED` at
/// that follower and changes nobody's membership.
#[test]
fn membership_change_at_a_follower_fails_and_changes_nothing() {
    let mut c = Cluster::new(&[1, 2, 3], &[]);
    let leader = c.leader();
    let follower = if leader == 1 { 2 } else { 1 };
    let before = c.status(leader).membership;
    assert_eq!(c.remove(follower, leader), TenureCode::Ok);
    c.run(1_000);
    assert_eq!(
        c.count(follower, TenureEventKind::MembershipChangeFailed),
        1,
        "{:?}",
        c.events
    );
    for id in [1, 2, 3] {
        assert_eq!(c.status(id).membership, before);
    }
    assert_eq!(c.status(follower).leader, leader);
}

/// A program that stored the new membership record but crashed before it
/// fed `PERSISTED_MEMBERSHIP`, and restarts from its old record (or none),
/// is brought to the new membership again: the change completes, and no
/// term has two leaders.
#[test]
fn membership_stored_then_crash_before_the_acknowledgement_completes_after_a_restart() {
    let mut c = Cluster::new(&[1, 2, 3], &[]);
    let leader = c.leader();
    let (removed, kept) = removed_and_kept(leader);
    c.hold.insert(kept);
    assert_eq!(c.remove(leader, removed), TenureCode::Ok);
    c.run(500);
    assert!(c.disks[&kept].unacknowledged.is_some());
    // The crash: the record written last is lost with it (its rename
    // never reached the disk); restarted on the bootstrap voters.
    c.hold.clear();
    c.disks.get_mut(&kept).unwrap().membership = None;
    c.start(kept, None).unwrap();
    c.run(3_000);
    assert_eq!(
        c.count(leader, TenureEventKind::MembershipChangeCompleted),
        1,
        "{:?}",
        c.events
    );
    let (_, stored) = c.disks[&kept].membership.clone().expect("stored again");
    assert_eq!(c.status(kept).membership, stored);
    assert_eq!(c.status(leader).membership, stored);
    c.assert_one_leader_per_term();
}

/// A leader that removes itself completes the change, stops leading, and
/// one of the remaining voters leads; the removed node does not disturb
/// them after (their term stays).
#[test]
fn membership_change_removing_the_leader_itself_leaves_the_others_one_leader() {
    let mut c = Cluster::new(&[1, 2, 3], &[]);
    let leader = c.leader();
    assert_eq!(c.remove(leader, leader), TenureCode::Ok);
    c.run(3_000);
    let others: Vec<u64> = [1, 2, 3].into_iter().filter(|&id| id != leader).collect();
    let new_leader = c.status(others[0]).leader;
    assert!(
        others.contains(&new_leader) && c.status(others[1]).leader == new_leader,
        "the others follow {new_leader}: {:?}",
        c.events
    );
    assert!(!c.status(leader).is_voter || c.status(leader).role != TenureRole::Leader);
    let term = c.status(new_leader).term;
    c.run(3_000);
    assert_eq!(c.status(new_leader).term, term, "{:?}", c.events);
    assert_eq!(c.status(new_leader).role, TenureRole::Leader);
    c.assert_one_leader_per_term();
}

/// A membership record of this node id but another cluster is refused
/// when the node is made (`TENURE_CODE_BAD_STATE`), even with the cluster
/// id set after the record.
#[test]
fn membership_record_of_another_cluster_is_refused() {
    let mut c = Cluster::new(&[1, 2, 3], &[]);
    let leader = c.leader();
    assert_eq!(c.remove(leader, removed_and_kept(leader).0), TenureCode::Ok);
    c.run(1_000);
    let (record, _) = c.disks[&leader]
        .membership
        .clone()
        .expect("a stored record");
    let config = c.config(leader, Some(&record)).unwrap();
    let mut err = null_mut();
    // SAFETY: a live configuration, freed once; `err` is writable.
    let (code, message) = unsafe {
        assert_eq!(
            tenure_config_set_cluster_id(config, CLUSTER + 1, &mut err),
            TenureCode::Ok
        );
        let node = tenure_node_new(config, TenureHardState::default(), c.now, &mut err);
        tenure_config_free(config);
        assert!(node.is_null());
        take(&mut err)
    };
    assert_eq!(code, TenureCode::BadState, "{message}");
    assert!(message.contains("membership record"), "{message}");
}
