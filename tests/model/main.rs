//! Model checking with stateright: the real `Node` in models of the
//! cluster, and the real `Host` with quiet idle groups (`host`), searched
//! exhaustively to a bound and by seeded random walks.

#![cfg(feature = "sim")]
#![forbid(unsafe_code)]

mod scaffold;

mod election;
mod host;
mod membership;
