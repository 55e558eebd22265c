//! The core's rules and behaviours, one module per concern, on single
//! nodes driven by hand (`hand`) and on the deterministic harness in
//! `common`. Rule tests are named `<rule>_<what holds>` (see
//! `rule_coverage`); a test that guards against a known failure says which
//! in one `Guards against:` line of its doc comment. Loops over seeds go
//! through `common::sweep` (see `tests/sim/main.rs`).

#![cfg(feature = "sim")]

#[path = "../common/mod.rs"]
mod common;
mod hand;

mod config_and_status;
mod election;
mod fencing_and_leases;
mod handover;
mod heartbeats;
mod membership;
mod properties;
mod rank;
mod rollback;
mod rule_coverage;
mod terms_and_time;
mod votes;
