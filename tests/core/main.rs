//! The core's rules and behaviours, one module per concern, on single
//! nodes driven by hand and on the deterministic harness in `common`.

#![cfg(feature = "sim")]

#[path = "../common/mod.rs"]
mod common;

mod fencing_and_leases;
mod membership;
mod properties;
mod rank;
mod review_defects;
mod rollback;
mod rule_coverage;
mod rules;
mod scenarios;
