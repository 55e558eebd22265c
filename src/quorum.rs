//! Voter sets, quorums and the quorum-th value (the tallies themselves
//! live with the peers, in `node/tracker.rs`).
//!
//! Invariant kept here (rule `joint_quorums`): only voters count, each at
//! most once per round, and a quorum is a quorum of **every** voter set of
//! the membership: outside a change there is one; during the joint phase
//! of a change a quorum needs a majority of the old voters and a majority
//! of the new ones. Any two quorums of one voter set intersect, so two
//! candidates cannot both win one term; a candidate of either of two
//! consecutive memberships needs a majority of a set they share.

use alloc::vec::Vec;

use crate::NodeId;

/// Bit of [`VoterSet::groups_of`]: a voter of the membership's `voters`.
pub(crate) const INCOMING: u8 = 1;
/// Bit of [`VoterSet::groups_of`]: a voter of the joint phase's `outgoing`.
pub(crate) const OUTGOING: u8 = 2;

/// The voters of a membership (every voter set, merged) and what wins.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct VoterSet {
    /// Each voter, sorted by id, with the sets it belongs to
    /// ([`INCOMING`], [`OUTGOING`] bits).
    voters: Vec<(NodeId, u8)>,
    /// The quorum of the incoming (or only) set.
    quorum: usize,
    /// The quorum of the outgoing set; 0 outside a joint phase.
    outgoing_quorum: usize,
}

impl VoterSet {
    /// One voter set: `ids` must be sorted and deduplicated (as `Config`
    /// keeps them).
    pub(crate) fn new(ids: &[NodeId], quorum: usize) -> VoterSet {
        debug_assert!(ids.windows(2).all(|w| w[0] < w[1]));
        VoterSet {
            voters: ids.iter().map(|&id| (id, INCOMING)).collect(),
            quorum,
            outgoing_quorum: 0,
        }
    }

    /// A joint voter set: majorities of both `incoming` and `outgoing`
    /// (each sorted and deduplicated; `outgoing` empty outside a change).
    pub(crate) fn joint(incoming: &[NodeId], outgoing: &[NodeId]) -> VoterSet {
        if outgoing.is_empty() && incoming.windows(2).all(|w| w[0] < w[1]) {
            // One set (no change running): its majority.
            return VoterSet::new(incoming, incoming.len() / 2 + 1);
        }
        let ids = crate::membership::sorted(incoming.iter().chain(outgoing).copied());
        let voters = ids
            .iter()
            .map(|&id| {
                let mut g = 0;
                if incoming.binary_search(&id).is_ok() {
                    g |= INCOMING;
                }
                if outgoing.binary_search(&id).is_ok() {
                    g |= OUTGOING;
                }
                (id, g)
            })
            .collect();
        VoterSet {
            voters,
            quorum: incoming.len() / 2 + 1,
            outgoing_quorum: if outgoing.is_empty() {
                0
            } else {
                outgoing.len() / 2 + 1
            },
        }
    }

    pub(crate) fn contains(&self, id: NodeId) -> bool {
        self.groups_of(id) != 0
    }

    pub(crate) fn len(&self) -> usize {
        self.voters.len()
    }

    /// The quorum of the incoming (or only) voter set.
    pub(crate) fn quorum(&self) -> usize {
        self.quorum
    }

    /// The quorum of the incoming (or only) set and of the outgoing set
    /// (0 outside a joint phase).
    pub(crate) fn quorums(&self) -> (usize, usize) {
        (self.quorum, self.outgoing_quorum)
    }

    /// Each voter with the sets it belongs to, by id.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (NodeId, u8)> + '_ {
        self.voters.iter().copied()
    }

    /// The sets `id` votes in ([`INCOMING`], [`OUTGOING`] bits; 0: none).
    pub(crate) fn groups_of(&self, id: NodeId) -> u8 {
        self.voters
            .binary_search_by_key(&id, |&(v, _)| v)
            .map_or(0, |i| self.voters[i].1)
    }

    /// Each voter set as (its bit, its quorum): one outside a joint phase,
    /// two during it.
    #[inline]
    pub(crate) fn sets(&self) -> impl Iterator<Item = (u8, usize)> + '_ {
        let joint = usize::from(self.outgoing_quorum > 0);
        [(INCOMING, self.quorum), (OUTGOING, self.outgoing_quorum)]
            .into_iter()
            .take(1 + joint)
    }
}

/// The `k`-th largest of `values` (1-based); `None` when there are fewer
/// than `k` (or `k` is 0). With the leader's own value counted apart,
/// `k = quorum − 1` gives the value a whole quorum reaches. Sorts in a
/// stack buffer when there are few values: this runs on acknowledgements
/// and must not allocate.
#[inline]
pub(crate) fn kth_largest(values: impl IntoIterator<Item = u64>, k: usize) -> Option<u64> {
    const STACK: usize = 8;
    let mut buf = [0u64; STACK];
    let mut n = 0;
    let mut values = values.into_iter();
    for v in values.by_ref() {
        if n == STACK {
            // A large voter set (rare): sort them all.
            let mut all: Vec<u64> = buf.iter().copied().chain([v]).chain(values).collect();
            all.sort_unstable_by(|a, b| b.cmp(a));
            return all.get(k.checked_sub(1)?).copied();
        }
        buf[n] = v;
        n += 1;
    }
    let values = &mut buf[..n];
    // Insertion sort, largest first: a handful of values.
    for i in 1..values.len() {
        let mut j = i;
        while j > 0 && values[j - 1] < values[j] {
            values.swap(j - 1, j);
            j -= 1;
        }
    }
    values.get(k.checked_sub(1)?).copied()
}

/// Where a round stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// A quorum granted.
    Won,
    /// So many refused that a quorum can no longer grant (split vote).
    Lost,
    /// Neither yet.
    Pending,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joint_sets_know_each_voters_sets() {
        // Old {1, 2, 3}, new {3, 4, 5}: 3 is in both.
        let v = VoterSet::joint(&[3, 4, 5], &[1, 2, 3]);
        assert_eq!(v.groups_of(3), INCOMING | OUTGOING);
        assert_eq!(v.groups_of(1), OUTGOING);
        assert_eq!(v.groups_of(9), 0);
        assert_eq!(v.sets().collect::<Vec<_>>(), [(INCOMING, 2), (OUTGOING, 2)]);
        let one = VoterSet::joint(&[1, 2, 3, 4, 5], &[]);
        assert_eq!(one, VoterSet::new(&[1, 2, 3, 4, 5], 3));
        assert_eq!(one.sets().collect::<Vec<_>>(), [(INCOMING, 3)]);
        assert!(one.contains(5) && !one.contains(0));
    }

    #[test]
    fn kth_largest_counts_from_the_top() {
        let v = [3, 9, 1, 7, 7];
        assert_eq!(kth_largest(v, 1), Some(9));
        assert_eq!(kth_largest(v, 2), Some(7));
        assert_eq!(kth_largest(v, 3), Some(7));
        assert_eq!(kth_largest(v, 4), Some(3));
        assert_eq!(kth_largest(v, 5), Some(1));
        assert_eq!(kth_largest(v, 6), None);
        assert_eq!(kth_largest(v, 0), None);
    }

    /// The bounded top-k agrees with sorting, for any order and for `k`
    /// beyond the stack buffer.
    #[test]
    fn kth_largest_agrees_with_sorting() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for n in 0..40usize {
            let values: Vec<u64> = (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x % 50
                })
                .collect();
            let mut sorted = values.clone();
            sorted.sort_unstable_by(|a, b| b.cmp(a));
            for k in 0..=n + 1 {
                let expected = k.checked_sub(1).and_then(|i| sorted.get(i).copied());
                assert_eq!(
                    kth_largest(values.iter().copied(), k),
                    expected,
                    "{values:?} k={k}"
                );
            }
        }
    }
}
