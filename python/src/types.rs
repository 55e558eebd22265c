//! Small frozen value classes: `HardState`, `Token`, `Lease`, `Role`,
//! `Status`.

use pyo3::prelude::*;

/// What a node stores durably: its term and its vote in that term.
#[pyclass(module = "tenure", frozen, eq, hash, from_py_object)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct HardState {
    /// The current term.
    #[pyo3(get)]
    pub(crate) term: u64,
    /// The node voted for in `term`, `None` if none.
    #[pyo3(get)]
    pub(crate) vote: Option<u64>,
}

#[pymethods]
impl HardState {
    #[new]
    #[pyo3(signature = (term = 0, vote = None))]
    fn new(term: u64, vote: Option<u64>) -> PyResult<HardState> {
        if vote == Some(0) {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "vote: node id 0 means \"no node\"; pass None for no vote",
            ));
        }
        Ok(HardState { term, vote })
    }

    pub(crate) fn __repr__(&self) -> String {
        match self.vote {
            Some(v) => format!("HardState(term={}, vote={v})", self.term),
            None => format!("HardState(term={}, vote=None)", self.term),
        }
    }
}

impl From<tenure::HardState> for HardState {
    fn from(s: tenure::HardState) -> HardState {
        HardState {
            term: s.term,
            vote: s.vote,
        }
    }
}

impl From<HardState> for tenure::HardState {
    fn from(s: HardState) -> tenure::HardState {
        tenure::HardState::new(s.term, s.vote)
    }
}

/// A leadership's fencing token: its term and its leader. Tokens order by
/// term, then leader; a later leadership always has a larger token.
#[pyclass(module = "tenure", frozen, eq, ord, hash, from_py_object)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Token {
    /// The term of the leadership.
    #[pyo3(get)]
    pub(crate) term: u64,
    /// The leader.
    #[pyo3(get)]
    pub(crate) leader: u64,
}

#[pymethods]
impl Token {
    #[new]
    fn new(term: u64, leader: u64) -> Token {
        Token { term, leader }
    }

    pub(crate) fn __repr__(&self) -> String {
        format!("Token(term={}, leader={})", self.term, self.leader)
    }
}

impl From<tenure::FencingToken> for Token {
    fn from(t: tenure::FencingToken) -> Token {
        Token {
            term: t.term,
            leader: t.leader,
        }
    }
}

impl From<Token> for tenure::FencingToken {
    fn from(t: Token) -> tenure::FencingToken {
        tenure::FencingToken {
            term: t.term,
            leader: t.leader,
        }
    }
}

/// A strict lease: the leadership holding it and when it ends, on the
/// clock `now_ns` comes from.
#[pyclass(module = "tenure", frozen, eq, hash, from_py_object)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Lease {
    /// The leadership's token.
    #[pyo3(get)]
    pub(crate) token: Token,
    /// When the lease ends (nanoseconds, the `now_ns` clock).
    #[pyo3(get)]
    pub(crate) valid_until_ns: u64,
}

#[pymethods]
impl Lease {
    pub(crate) fn __repr__(&self) -> String {
        format!(
            "Lease(token={}, valid_until_ns={})",
            self.token.__repr__(),
            self.valid_until_ns
        )
    }
}

impl From<tenure::Lease> for Lease {
    fn from(l: tenure::Lease) -> Lease {
        Lease {
            token: l.token.into(),
            valid_until_ns: l.valid_until.as_nanos(),
        }
    }
}

value_enum! {
    /// A node's role.
    Role {
        /// Follows the leader of its term (or waits for one).
        Follower,
        /// Runs a pre-vote round, or waits for its term bump to be durable.
        PreCandidate,
        /// Asks for votes.
        Candidate,
        /// Won its term.
        Leader,
    }
}

impl From<tenure::Role> for Role {
    fn from(r: tenure::Role) -> Role {
        match r {
            tenure::Role::Leader => Role::Leader,
            tenure::Role::Candidate => Role::Candidate,
            tenure::Role::PreCandidate => Role::PreCandidate,
            // A role added later reads as following until named here.
            _ => Role::Follower,
        }
    }
}

/// Names one membership exactly: its epoch, the term of the leader that
/// made it, and a fingerprint of its voter sets.
#[pyclass(module = "tenure", frozen, eq, hash, from_py_object)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct MembershipId {
    /// The membership's epoch.
    #[pyo3(get)]
    pub(crate) epoch: u64,
    /// The term of the leader that made it.
    #[pyo3(get)]
    pub(crate) term: u64,
    /// A fingerprint of its voters, outgoing voters and observers.
    #[pyo3(get)]
    pub(crate) fingerprint: u64,
}

#[pymethods]
impl MembershipId {
    #[new]
    fn new(epoch: u64, term: u64, fingerprint: u64) -> MembershipId {
        MembershipId {
            epoch,
            term,
            fingerprint,
        }
    }

    pub(crate) fn __repr__(&self) -> String {
        format!(
            "MembershipId(epoch={}, term={}, fingerprint={})",
            self.epoch, self.term, self.fingerprint
        )
    }
}

impl From<tenure::MembershipId> for MembershipId {
    fn from(id: tenure::MembershipId) -> MembershipId {
        MembershipId {
            epoch: id.epoch,
            term: id.term,
            fingerprint: id.fingerprint,
        }
    }
}

impl From<MembershipId> for tenure::MembershipId {
    fn from(id: MembershipId) -> tenure::MembershipId {
        tenure::MembershipId {
            epoch: id.epoch,
            term: id.term,
            fingerprint: id.fingerprint,
        }
    }
}

/// A snapshot of a node (`Node.status()`).
#[pyclass(module = "tenure", frozen, get_all)]
#[derive(Clone, Debug)]
pub(crate) struct Status {
    /// The node's id.
    pub(crate) id: u64,
    /// Its role.
    pub(crate) role: Role,
    /// Its current term.
    pub(crate) term: u64,
    /// Its vote in that term.
    pub(crate) vote: Option<u64>,
    /// The leader it knows in that term.
    pub(crate) leader: Option<u64>,
    /// The state storage last confirmed.
    pub(crate) persisted: HardState,
    /// Whether a persist action awaits its confirmation.
    pub(crate) write_in_flight: bool,
    /// Whether it is a voter.
    pub(crate) is_voter: bool,
    /// When its strict lease ends (as of its latest `now_ns`), if it holds
    /// one.
    pub(crate) lease_until_ns: Option<u64>,
    /// Its leadership's token, while it leads.
    pub(crate) token: Option<Token>,
    /// The membership it acts on.
    pub(crate) membership: MembershipId,
    /// Its voters (both sets while a change is in its joint phase).
    pub(crate) voters: Vec<u64>,
    /// Its observers.
    pub(crate) observers: Vec<u64>,
}

#[pymethods]
impl Status {
    pub(crate) fn __repr__(&self) -> String {
        format!(
            "Status(id={}, role={:?}, term={}, leader={:?}, persisted={})",
            self.id,
            self.role,
            self.term,
            self.leader,
            self.persisted.__repr__()
        )
    }
}

impl From<tenure::Status> for Status {
    fn from(s: tenure::Status) -> Status {
        Status {
            id: s.id,
            role: s.role.into(),
            term: s.term,
            vote: s.vote,
            leader: s.leader,
            persisted: s.persisted.into(),
            write_in_flight: s.write_in_flight,
            is_voter: s.is_voter,
            lease_until_ns: s.lease_until.map(tenure::Instant::as_nanos),
            token: s.fencing_token.map(Into::into),
            membership: s.membership.id().into(),
            voters: {
                let mut voters: Vec<u64> = s.membership.voters.clone();
                voters.extend(&s.membership.outgoing);
                voters.sort_unstable();
                voters.dedup();
                voters
            },
            observers: s.membership.observers.clone(),
        }
    }
}
