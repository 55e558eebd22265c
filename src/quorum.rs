//! Vote and acknowledgement tallies over the voters of a membership.
//!
//! Invariant kept here (rule `joint_quorums`): only voters count, each at
//! most once per round, and a quorum is a quorum of **every** voter set of
//! the membership: outside a change there is one; during the joint phase
//! of a change a quorum needs a majority of the old voters and a majority
//! of the new ones. Any two quorums of one voter set intersect, so two
//! candidates cannot both win one term; a candidate of either of two
//! consecutive memberships needs a majority of a set they share.

use alloc::vec;
use alloc::vec::Vec;

use crate::NodeId;

/// Bit of [`VoterSet::groups_of`]: a voter of the membership's `voters`.
pub(crate) const INCOMING: u8 = 1;
/// Bit of [`VoterSet::groups_of`]: a voter of the joint phase's `outgoing`.
pub(crate) const OUTGOING: u8 = 2;

/// The voters of a membership (every voter set, merged) and what wins.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct VoterSet {
    ids: Vec<NodeId>,
    /// Per voter, index-aligned with `ids`: which sets it belongs to.
    groups: Vec<u8>,
    /// The quorum of the incoming (or only) set.
    quorum: usize,
    /// The quorum of the outgoing set; 0 outside a joint phase.
    outgoing_quorum: usize,
}

impl VoterSet {
    /// One voter set: `ids` must be sorted and deduplicated (as `Config`
    /// keeps them).
    pub(crate) fn new(ids: Vec<NodeId>, quorum: usize) -> VoterSet {
        debug_assert!(ids.windows(2).all(|w| w[0] < w[1]));
        VoterSet {
            groups: vec![INCOMING; ids.len()],
            ids,
            quorum,
            outgoing_quorum: 0,
        }
    }

    /// A joint voter set: majorities of both `incoming` and `outgoing`
    /// (each sorted and deduplicated; `outgoing` empty outside a change).
    pub(crate) fn joint(incoming: &[NodeId], outgoing: &[NodeId]) -> VoterSet {
        let ids = crate::membership::sorted(incoming.iter().chain(outgoing).copied());
        let groups = ids
            .iter()
            .map(|id| {
                let mut g = 0;
                if incoming.binary_search(id).is_ok() {
                    g |= INCOMING;
                }
                if outgoing.binary_search(id).is_ok() {
                    g |= OUTGOING;
                }
                g
            })
            .collect();
        VoterSet {
            ids,
            groups,
            quorum: incoming.len() / 2 + 1,
            outgoing_quorum: if outgoing.is_empty() {
                0
            } else {
                outgoing.len() / 2 + 1
            },
        }
    }

    pub(crate) fn index_of(&self, id: NodeId) -> Option<usize> {
        self.ids.binary_search(&id).ok()
    }

    pub(crate) fn contains(&self, id: NodeId) -> bool {
        self.index_of(id).is_some()
    }

    pub(crate) fn len(&self) -> usize {
        self.ids.len()
    }

    /// The quorum of the incoming (or only) voter set.
    pub(crate) fn quorum(&self) -> usize {
        self.quorum
    }

    pub(crate) fn ids(&self) -> &[NodeId] {
        &self.ids
    }

    /// The sets `id` votes in ([`INCOMING`], [`OUTGOING`] bits; 0: none).
    pub(crate) fn groups_of(&self, id: NodeId) -> u8 {
        self.index_of(id).map_or(0, |i| self.groups[i])
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

/// Per-voter answers of one round. Allocated once per node and reset per
/// round, so counting never allocates.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Tally {
    answers: Vec<Option<bool>>,
}

impl Tally {
    pub(crate) fn new(voters: &VoterSet) -> Tally {
        Tally {
            answers: vec![None; voters.len()],
        }
    }

    pub(crate) fn reset(&mut self) {
        self.answers.iter_mut().for_each(|a| *a = None);
    }

    /// Forgets the refusals, keeping the grants: a round asked again
    /// counts a voter's new answer, while a grant (a durable vote in this
    /// term) stays valid.
    pub(crate) fn forget_refusals(&mut self) {
        for answer in &mut self.answers {
            if *answer == Some(false) {
                *answer = None;
            }
        }
    }

    /// Records the first answer of the voter at `index`; later answers of the
    /// same voter in the same round are ignored (a duplicate must not count
    /// twice). Returns whether it was recorded.
    pub(crate) fn record(&mut self, index: usize, granted: bool) -> bool {
        match self.answers.get_mut(index) {
            Some(slot @ None) => {
                *slot = Some(granted);
                true
            }
            _ => false,
        }
    }

    pub(crate) fn granted(&self) -> usize {
        self.answers.iter().filter(|a| **a == Some(true)).count()
    }

    /// Where the round stands over every voter set of `voters` (rule
    /// `joint_quorums`): won once each set granted a quorum, lost once any
    /// set can no longer.
    pub(crate) fn outcome(&self, voters: &VoterSet) -> Outcome {
        let mut won = true;
        for (bit, quorum) in voters.sets() {
            let (mut granted, mut unknown) = (0, 0);
            for (answer, groups) in self.answers.iter().zip(&voters.groups) {
                if groups & bit != 0 {
                    match answer {
                        Some(true) => granted += 1,
                        None => unknown += 1,
                        Some(false) => {}
                    }
                }
            }
            if granted + unknown < quorum {
                return Outcome::Lost;
            }
            won &= granted >= quorum;
        }
        if won { Outcome::Won } else { Outcome::Pending }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn five() -> VoterSet {
        VoterSet::new(vec![1, 2, 3, 4, 5], 3)
    }

    #[test]
    fn majority_wins_and_split_is_detected() {
        let v = five();
        let mut t = Tally::new(&v);
        t.record(0, true);
        t.record(1, true);
        assert_eq!(t.outcome(&v), Outcome::Pending);
        t.record(2, true);
        assert_eq!(t.outcome(&v), Outcome::Won);

        t.reset();
        t.record(0, true);
        t.record(1, false);
        t.record(2, false);
        assert_eq!(t.outcome(&v), Outcome::Pending);
        t.record(3, false);
        assert_eq!(t.outcome(&v), Outcome::Lost);
    }

    #[test]
    fn joint_quorums_need_a_majority_of_both_sets() {
        // Old {1, 2, 3}, new {3, 4, 5}: ids 1..=5, 3 in both.
        let v = VoterSet::joint(&[3, 4, 5], &[1, 2, 3]);
        let mut t = Tally::new(&v);
        // A majority of the old set alone does not win.
        t.record(0, true);
        t.record(1, true);
        assert_eq!(t.outcome(&v), Outcome::Pending);
        // Nor the new set's: 3 and 4 are a new majority, 3 completes both.
        t.record(3, true);
        assert_eq!(t.outcome(&v), Outcome::Pending);
        t.record(2, true);
        assert_eq!(t.outcome(&v), Outcome::Won);
        // Losing either set loses the round.
        t.reset();
        t.record(3, false);
        t.record(4, false);
        assert_eq!(t.outcome(&v), Outcome::Lost);
        assert_eq!(v.groups_of(3), INCOMING | OUTGOING);
        assert_eq!(v.groups_of(1), OUTGOING);
        assert_eq!(v.groups_of(9), 0);
    }

    #[test]
    fn a_voter_counts_once_per_round() {
        let v = five();
        let mut t = Tally::new(&v);
        assert!(t.record(0, true));
        assert!(!t.record(0, true));
        assert!(!t.record(0, false));
        assert!(!t.record(99, true));
        assert_eq!(t.granted(), 1);
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

    #[test]
    fn only_configured_voters_have_an_index() {
        let v = five();
        assert_eq!(v.index_of(3), Some(2));
        assert_eq!(v.index_of(6), None);
        assert!(!v.contains(0));
    }
}
