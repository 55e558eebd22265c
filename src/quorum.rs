//! Vote and acknowledgement tallies over a fixed voter set.
//!
//! Invariant kept here: only configured voters count, each at most once per
//! round. Any two quorums of a majority intersect, so two candidates cannot
//! both win one term.

use alloc::vec;
use alloc::vec::Vec;

use crate::NodeId;

/// The configured voters and the number of votes that wins.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct VoterSet {
    ids: Vec<NodeId>,
    quorum: usize,
}

impl VoterSet {
    /// `ids` must be sorted and deduplicated (as `Config` keeps them).
    pub(crate) fn new(ids: Vec<NodeId>, quorum: usize) -> VoterSet {
        debug_assert!(ids.windows(2).all(|w| w[0] < w[1]));
        VoterSet { ids, quorum }
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

    pub(crate) fn quorum(&self) -> usize {
        self.quorum
    }

    pub(crate) fn ids(&self) -> &[NodeId] {
        &self.ids
    }
}

/// The `k`-th largest of `values` (1-based), reordering them; `None` when
/// there are fewer than `k` (or `k` is 0). With the leader's own value
/// counted apart, `k = quorum − 1` gives the value a whole quorum reaches.
pub(crate) fn kth_largest(values: &mut [u64], k: usize) -> Option<u64> {
    values.sort_unstable_by(|a, b| b.cmp(a));
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

    pub(crate) fn outcome(&self, quorum: usize) -> Outcome {
        let granted = self.granted();
        let unknown = self.answers.iter().filter(|a| a.is_none()).count();
        if granted >= quorum {
            Outcome::Won
        } else if granted + unknown < quorum {
            Outcome::Lost
        } else {
            Outcome::Pending
        }
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
        assert_eq!(t.outcome(v.quorum()), Outcome::Pending);
        t.record(2, true);
        assert_eq!(t.outcome(v.quorum()), Outcome::Won);

        t.reset();
        t.record(0, true);
        t.record(1, false);
        t.record(2, false);
        assert_eq!(t.outcome(v.quorum()), Outcome::Pending);
        t.record(3, false);
        assert_eq!(t.outcome(v.quorum()), Outcome::Lost);
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
        let mut v = vec![3, 9, 1, 7];
        assert_eq!(kth_largest(&mut v, 1), Some(9));
        assert_eq!(kth_largest(&mut v, 2), Some(7));
        assert_eq!(kth_largest(&mut v, 4), Some(1));
        assert_eq!(kth_largest(&mut v, 5), None);
        assert_eq!(kth_largest(&mut v, 0), None);
    }

    #[test]
    fn only_configured_voters_have_an_index() {
        let v = five();
        assert_eq!(v.index_of(3), Some(2));
        assert_eq!(v.index_of(6), None);
        assert!(!v.contains(0));
    }
}
