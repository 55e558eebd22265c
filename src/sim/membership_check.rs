//! Cluster-wide membership invariants, evaluated after every simulated
//! event (see [`MembershipChecker`]).

use std::collections::BTreeMap;
use std::format;
use std::string::String;
use std::vec::Vec;

use crate::{Membership, MembershipId, NodeId};

/// A membership's version, `(term, epoch)`: the order of the module docs
/// of [`membership`](crate::membership).
pub(crate) fn version(m: &Membership) -> (u64, u64) {
    (m.term, m.epoch)
}

/// The voter sets of `m`: `voters`, and `outgoing` during a joint phase.
fn voter_sets(m: &Membership) -> impl Iterator<Item = &Vec<NodeId>> {
    [&m.voters, &m.outgoing]
        .into_iter()
        .filter(|set| !set.is_empty())
}

/// Whether every quorum of `a` (a majority of each of its voter sets)
/// intersects every quorum of `b`. Exact: it searches for a quorum of `a`
/// whose complement still holds a quorum of `b` (the voters are few, so
/// all subsets are tried).
#[must_use]
pub fn quorums_intersect(a: &Membership, b: &Membership) -> bool {
    let universe: Vec<NodeId> =
        crate::membership::sorted(a.all_voters().into_iter().chain(b.all_voters()));
    if universe.len() > 16 {
        // Not simulated; refuse to guess.
        return false;
    }
    let quorum_in = |m: &Membership, mask: u32| {
        voter_sets(m).all(|set| {
            let held = set
                .iter()
                .filter(|id| {
                    universe
                        .iter()
                        .position(|u| u == *id)
                        .is_some_and(|i| mask & (1 << i) != 0)
                })
                .count();
            held > set.len() / 2
        })
    };
    let all = (1u32 << universe.len()) - 1;
    !(0..=all).any(|mask| quorum_in(a, mask) && quorum_in(b, all & !mask))
}

/// Whether the nodes' durable memberships store `m`: a majority of each of
/// its voter sets holds `m` or a newer membership (the definition of the
/// [`membership`](crate::membership) module docs).
fn is_stored(m: &Membership, disks: &BTreeMap<NodeId, (u64, u64)>) -> bool {
    let v = version(m);
    voter_sets(m).all(|set| {
        let holding = set
            .iter()
            .filter(|id| disks.get(id).is_some_and(|d| *d >= v))
            .count();
        holding > set.len() / 2
    })
}

/// A membership that became stored.
#[derive(Clone, Debug)]
struct Stored {
    membership: Membership,
    /// The highest term any node held durably when it became stored: every
    /// vote of a higher term was granted after it was stored.
    bound: u64,
}

/// Membership invariants over a whole run, on top of
/// [`Checker`](super::Checker)'s (one leader per term and exclusive leases,
/// which hold across changes since they are checked after every event
/// whatever the membership):
///
/// - `membership_completeness`: a leader of term `T` acts on a membership
///   at least as new as every membership that was *stored* (a majority of
///   each of its voter sets durably held it or a newer one) before any
///   node durably reached term `T`, i.e. in an earlier term: a leader
///   never uses a membership older than a committed one (Raft's leader
///   completeness, §5.4.3, for the one-entry membership log);
/// - `membership_quorums_intersect`: every membership a leader acts on
///   that is at least the newest stored membership has quorums
///   intersecting the newest stored one's (the docs' argument: two
///   memberships in use at once are consecutive, a stored one and the one
///   built on it, and their quorums intersect); and two leaders acting at
///   once on memberships of the same epoch, or of epochs one apart where
///   neither is older than the newest stored one, use intersecting quorums.
///
/// Feed it every node's durable membership whenever one changes
/// ([`MembershipChecker::disks_changed`]) and the leaders after every event
/// ([`MembershipChecker::check_leaders`]).
#[derive(Clone, Debug, Default)]
pub struct MembershipChecker {
    stored: Vec<Stored>,
    /// Leaders checked already: (node, term, membership id, newest stored id).
    checked: BTreeMap<NodeId, (u64, MembershipId, Option<MembershipId>)>,
    pending: Vec<(&'static str, String)>,
}

impl MembershipChecker {
    /// The durable memberships changed: `disks` holds every node's durable
    /// membership (the bootstrap one for a node that never wrote one; none
    /// for a node that never had one) and `max_term` the highest term any
    /// node holds durably.
    pub fn disks_changed<'a>(
        &mut self,
        disks: impl IntoIterator<Item = (NodeId, Option<&'a Membership>)>,
        max_term: u64,
    ) {
        let disks: Vec<(NodeId, Option<&Membership>)> = disks.into_iter().collect();
        let versions: BTreeMap<NodeId, (u64, u64)> = disks
            .iter()
            .filter_map(|(id, m)| m.map(|m| (*id, version(m))))
            .collect();
        for (_, m) in &disks {
            let Some(m) = m else { continue };
            let known = self
                .stored
                .iter()
                .any(|s| s.membership.id() == m.id() && s.membership.voters == m.voters);
            if !known && is_stored(m, &versions) {
                self.stored.push(Stored {
                    membership: (*m).clone(),
                    bound: max_term,
                });
            }
        }
    }

    /// The newest stored membership, if any.
    pub fn newest_stored(&self) -> Option<&Membership> {
        self.stored
            .iter()
            .map(|s| &s.membership)
            .max_by_key(|m| version(m))
    }

    /// Whether `m` (or a newer membership) is stored.
    pub fn is_stored(&self, m: &Membership) -> bool {
        self.stored
            .iter()
            .any(|s| version(&s.membership) >= version(m))
    }

    /// Checks the leaders acting now: `(node, term, membership)` each.
    pub fn check_leaders(&mut self, leaders: &[(NodeId, u64, &Membership)]) {
        let newest = self.newest_stored().cloned();
        for &(id, term, m) in leaders {
            let key = (term, m.id(), newest.as_ref().map(Membership::id));
            if self.checked.get(&id) == Some(&key) {
                continue;
            }
            self.checked.insert(id, key);
            // Completeness: at least every membership stored in an earlier
            // term.
            if let Some(s) = self
                .stored
                .iter()
                .filter(|s| s.bound < term)
                .max_by_key(|s| version(&s.membership))
                && version(m) < version(&s.membership)
            {
                let detail = format!(
                    "node {id} leads term {term} on membership {} {:?}/{:?}, older than {} {:?}/{:?}, stored when the highest durable term was {}",
                    m.id(),
                    m.voters,
                    m.outgoing,
                    s.membership.id(),
                    s.membership.voters,
                    s.membership.outgoing,
                    s.bound
                );
                self.pending.push(("membership_completeness", detail));
            }
            if let Some(s) = newest.as_ref()
                && version(m) >= version(s)
                && !quorums_intersect(m, s)
            {
                let detail = format!(
                    "node {id} leads term {term} on membership {} {:?}/{:?}, whose quorums miss those of the newest stored one, {} {:?}/{:?}",
                    m.id(),
                    m.voters,
                    m.outgoing,
                    s.id(),
                    s.voters,
                    s.outgoing
                );
                self.pending.push(("membership_quorums_intersect", detail));
            }
        }
        // Two leaders at once on adjacent memberships, both current.
        for (i, &(a, ta, ma)) in leaders.iter().enumerate() {
            for &(b, tb, mb) in &leaders[i + 1..] {
                let current =
                    |m: &Membership| newest.as_ref().is_none_or(|s| version(m) >= version(s));
                if ma.epoch.abs_diff(mb.epoch) <= 1
                    && current(ma)
                    && current(mb)
                    && !quorums_intersect(ma, mb)
                {
                    let detail = format!(
                        "node {a} (term {ta}) on {} {:?}/{:?} and node {b} (term {tb}) on {} {:?}/{:?} lead at once with disjoint quorums",
                        ma.id(),
                        ma.voters,
                        ma.outgoing,
                        mb.id(),
                        mb.voters,
                        mb.outgoing
                    );
                    self.pending.push(("membership_quorums_intersect", detail));
                }
            }
        }
    }

    /// Takes the violations found since the last call, in the order found.
    pub fn take_violations(&mut self) -> Vec<(&'static str, String)> {
        core::mem::take(&mut self.pending)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(epoch: u64, term: u64, voters: &[NodeId], outgoing: &[NodeId]) -> Membership {
        Membership {
            epoch,
            term,
            voters: voters.to_vec(),
            outgoing: outgoing.to_vec(),
            ..Membership::default()
        }
    }

    #[test]
    fn quorum_intersection_is_exact() {
        let old = m(0, 0, &[1, 2, 3], &[]);
        let joint = m(1, 1, &[1, 2, 4], &[1, 2, 3]);
        let new = m(2, 1, &[1, 2, 4], &[]);
        assert!(quorums_intersect(&old, &joint));
        assert!(quorums_intersect(&joint, &new));
        // A replacement without the joint phase: {1,3} and {2,4} are
        // disjoint majorities.
        assert!(!quorums_intersect(&old, &new));
        // Growing by one shares a quorum; by two does not.
        assert!(quorums_intersect(&old, &m(1, 1, &[1, 2, 3, 4], &[])));
        assert!(!quorums_intersect(&old, &m(1, 1, &[1, 2, 3, 4, 5], &[])));
    }

    #[test]
    fn a_leader_on_a_membership_older_than_a_stored_one_is_caught() {
        let boot = m(0, 0, &[1, 2, 3], &[]);
        let next = m(1, 2, &[1, 2, 3], &[]);
        let mut c = MembershipChecker::default();
        c.disks_changed([(1, Some(&boot)), (2, Some(&boot)), (3, Some(&boot))], 1);
        c.disks_changed([(1, Some(&next)), (2, Some(&next)), (3, Some(&boot))], 2);
        // Term 2: stored during that term, no claim.
        c.check_leaders(&[(3, 2, &boot)]);
        assert!(c.take_violations().is_empty());
        c.check_leaders(&[(3, 3, &boot)]);
        let v = c.take_violations();
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].0, "membership_completeness");
    }

    #[test]
    fn leaders_on_disjoint_quorums_are_caught() {
        let boot = m(0, 0, &[1, 2, 3], &[]);
        let jump = m(1, 2, &[1, 2, 3, 4, 5], &[]);
        let mut c = MembershipChecker::default();
        c.disks_changed([(1, Some(&boot)), (2, Some(&boot)), (3, Some(&boot))], 1);
        c.check_leaders(&[(4, 2, &jump)]);
        let v = c.take_violations();
        assert_eq!(v[0].0, "membership_quorums_intersect");
    }
}
