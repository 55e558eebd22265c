//! The simulator: its standard and feature scenarios over many seeds,
//! quickcheck properties over whole-cluster fault schedules, randomized
//! sweeps, and proof that its checks can fail.
//!
//! Every loop over seeds that must pass is a `common::sweep` named by an
//! environment variable prefix (`TENURE_STANDARD_SCENARIOS`,
//! `TENURE_FAULT_SWEEP`, ...): a failure prints its seed and
//! `{PREFIX}_SEEDS=<seed>`, which replays it; `{PREFIX}_SEEDS=a..b` or a
//! comma-separated list chooses the seeds, `{PREFIX}_RUNS=<n>` how many.

#![cfg(feature = "sim")]

#[path = "../common/mod.rs"]
mod common;

mod fault_sweeps;
mod hand_over;
mod heartbeat_now;
mod hosts;
mod leases;
mod membership;
mod membership_mixed_timing;
mod membership_sweeps;
mod node_checker;
mod pre_vote_duel;
mod properties;
mod rank;
mod rank_properties;
mod rank_sweeps;
mod replica_fence;
mod replication;
mod safety_sweep;
mod scenarios;
mod seed_algorithms;
mod urgent_renewal;
mod urgent_renewal_attacks;
