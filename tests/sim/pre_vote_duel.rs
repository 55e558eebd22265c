//! Rule `pre_vote_duel_ranked` and its re-ask (a pre-candidate that
//! outranks a dueling one asks it again if it has not answered): nodes of
//! a new cluster that start one after another, 3, 5 or 7 voters, every
//! rank policy, one-way cuts and deaf nodes. What must hold: every
//! simulator check, a leader soon after a quorum is up, and no storm of
//! pre-vote requests between pre-candidates.
//!
//! Seeds: `TENURE_DUEL_STAGGERED` (see `common::sweep`).

#![cfg(feature = "sim")]

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use rand_core::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use tenure::sim::{Cluster, Fault, SimConfig};
use tenure::{Config, Instant, MessageKind, NodeId, RankPolicy};

use crate::common::{self, ms};

/// The re-asks in `c`'s history: pre-vote requests a node sent a peer in
/// the same step as refusing that peer's pre-vote (the refusal goes
/// first), per (from, to, proposed term).
fn re_asks(c: &Cluster) -> BTreeMap<(NodeId, NodeId, u64), usize> {
    let mut counts = BTreeMap::new();
    let sent = c.sent();
    for pair in sent.windows(2) {
        let ((t0, f0, to0, m0), (t1, f1, to1, m1)) = (&pair[0], &pair[1]);
        if t0 == t1
            && (f0, to0) == (f1, to1)
            && matches!(m0.kind, MessageKind::PreVoteResponse { granted: false })
            && matches!(m1.kind, MessageKind::PreVoteRequest { .. })
        {
            *counts.entry((*f1, *to1, m1.term)).or_default() += 1;
        }
    }
    counts
}

/// A new cluster of 3, 5 or 7 voters (rank policy by seed, priorities
/// random) whose nodes start in a random order 20–300 ms apart, on a
/// 1–10 ms network with 2% duplicates, one node (started last) deaf or
/// cut one way from another in a third of the runs. A leader must come
/// within three election timeouts (plus the rank steps) of a quorum being
/// up and the pre-vote requests between any two nodes per proposed term
/// do not go back and forth.
///
/// Guards against: two pre-candidates that keep asking each other again.
#[test]
fn pre_vote_duel_ranked_staggered_starts_elect_soon_without_a_request_storm() {
    let mut slowest = (Duration::ZERO, 0);
    let mut busiest = 0;
    common::sweep("TENURE_DUEL_STAGGERED", 0..240, |seed| {
        let mut rng = Pcg64Mcg::seed_from_u64(seed ^ 0xD0E1_5EED);
        let mut pick = |n: u64| rng.next_u64() % n;
        let nodes = [3, 5, 7][(seed % 3) as usize];
        let policy = RankPolicy::ALL[((seed / 3) % 4) as usize];
        let priorities: Vec<(NodeId, u32)> =
            (1..=nodes).map(|id| (id, 1 + pick(3) as u32)).collect();
        let mut cfg = SimConfig::new(nodes, seed);
        cfg.latency = (ms(1), ms(10));
        cfg.duplicate = 0.02;
        cfg.node_config = Rc::new(move |id, voters| {
            Config::new(id, voters.iter().copied())
                .rank_policy(policy)
                .priorities(priorities.clone())
        });
        let probe = (cfg.node_config)(1, &[1]);
        let election = probe.effective_election_timeout() + probe.effective_election_jitter();
        let rank_steps = probe.effective_rank_step() * nodes as u32;
        let mut order: Vec<NodeId> = (1..=nodes).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, pick(i as u64 + 1) as usize);
        }
        let flaw = pick(3);
        let last = order[order.len() - 1];
        let other = order[0];
        let mut c = Cluster::new(cfg);
        c.enable_history();
        for &id in &order[1..] {
            c.apply(Fault::Crash(id));
        }
        match flaw {
            0 => c.apply(Fault::Deaf(last)),
            1 => c.apply(Fault::Cut {
                from: last,
                to: other,
            }),
            _ => {}
        }
        let quorum = (nodes / 2 + 1) as usize;
        let mut quorum_up = Instant::ZERO;
        for (i, &id) in order.iter().enumerate().skip(1) {
            let at = c.now() + ms(20 + pick(281));
            if let Err(v) = c.run_until(at) {
                return Some(v.to_string());
            }
            c.apply(Fault::Restart(id));
            if i + 1 == quorum {
                quorum_up = c.now();
            }
        }
        if let Err(v) = c.check() {
            return Some(v.to_string());
        }
        let bound = election * 3 + rank_steps;
        if let Err(v) = c.run_until(c.now().max(quorum_up + bound) + ms(2_000)) {
            return Some(v.to_string());
        }
        let elected = c
            .events()
            .iter()
            .find(|(_, _, e)| matches!(e, tenure::Event::BecameLeader { .. }))
            .map(|(at, _, _)| *at)
            .filter(|&at| at <= quorum_up + bound);
        // A re-ask goes only to a duelist this node outranks: two nodes
        // that re-ask each other for one term disagree on who ranks higher,
        // and could keep asking each other.
        let asked = re_asks(&c);
        busiest = busiest.max(asked.values().copied().max().unwrap_or(0));
        if let Some(((a, b, term), _)) = asked
            .iter()
            .find(|((a, b, t), _)| asked.contains_key(&(*b, *a, *t)))
        {
            return Some(format!(
                "nodes {a} and {b} asked each other again for term {term} ({nodes} voters, {policy:?}, flaw {flaw}): {asked:?}"
            ));
        }
        match elected {
            None if flaw == 2 => Some(format!(
                "no leader within {bound:?} of a quorum up at {quorum_up:?} ({nodes} voters, {policy:?}, order {order:?})"
            )),
            Some(at) => {
                let took = at.saturating_duration_since(quorum_up);
                if took > slowest.0 {
                    slowest = (took, seed);
                }
                None
            }
            None => None,
        }
    });
    eprintln!(
        "slowest first election after a quorum was up: {:?} (seed {}); most re-asks from one node to one peer for one term: {busiest}",
        slowest.0, slowest.1
    );
}
