//! The timer table: every deadline the node has, by name.
//!
//! A deadline is not stored twice: [`Node::deadline`] derives each timer's
//! next firing from the state that owns it (the phase, the campaign gates,
//! the transfer, the promotion). [`Node::next_deadline`] is the earliest
//! entry; [`Input::Tick`](crate::Input::Tick) fires the expired entries in
//! table order, re-reading each entry just before it fires, because an
//! earlier firing may have moved it (a leader that steps down has no
//! heartbeat due).

use alloc::vec::Vec;

use super::{Action, Node, Phase};
use crate::position::LogPosition;
use crate::rule::Rule;
use crate::time::Instant;

/// One named timer. Expired timers fire in this order: fencing first (a
/// leader past its lease must not send another heartbeat as leader), then
/// the leader's death, handover deadlines, the election round, a new
/// campaign, and last the heartbeat. A tick reads the leader's timers
/// (`StepDown`, `Transfer`, `Heartbeat`) or the others, by the phase it
/// finds: a leader that steps down fires no follower timer in that tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Timer {
    /// Rule `soft_fencing` or `strict_lease`: the leader steps down.
    StepDown,
    /// Rule `strict_lease`: the announced lease runs out (the step
    /// announces `LeaseLost`).
    LeaseEnd,
    /// Rule `rollback_seen_by_peers`: a restarted node asks its peers,
    /// once, for the highest term they saw from it.
    RestartProbe,
    /// Rule `leader_death`: no leader message for a death timeout.
    LeaderDeath,
    /// Rule `transfer_leadership`: a transfer gives up.
    Transfer,
    /// Rule `urgent_renewal`: voters that did not acknowledge the newest
    /// round in time get one more.
    Renew,
    /// Rule `promote_one_campaign`: a promotion gives up.
    Promotion,
    /// Rule `election_timeout`: the running pre-vote or vote round gives up.
    ElectionRound,
    /// The follower timer: every campaign gate is open.
    Campaign,
    /// The leader's next heartbeat round.
    Heartbeat,
}

impl Timer {
    /// Every timer, in firing order.
    #[cfg(test)]
    const ALL: [Timer; 10] = [
        Timer::StepDown,
        Timer::LeaseEnd,
        Timer::RestartProbe,
        Timer::LeaderDeath,
        Timer::Transfer,
        Timer::Renew,
        Timer::Promotion,
        Timer::ElectionRound,
        Timer::Campaign,
        Timer::Heartbeat,
    ];

    /// The timers a leader can have armed, in firing order.
    const LEADING: [Timer; 5] = [
        Timer::StepDown,
        Timer::LeaseEnd,
        Timer::Transfer,
        Timer::Renew,
        Timer::Heartbeat,
    ];

    /// The timers a non-leader can have armed, in firing order.
    const NOT_LEADING: [Timer; 6] = [
        Timer::RestartProbe,
        Timer::LeaderDeath,
        Timer::Transfer,
        Timer::Promotion,
        Timer::ElectionRound,
        Timer::Campaign,
    ];

    /// The name the decision log uses.
    pub(super) fn name(self) -> &'static str {
        match self {
            Timer::StepDown => "step_down",
            Timer::LeaseEnd => "lease_end",
            Timer::RestartProbe => "restart_probe",
            Timer::LeaderDeath => "leader_death",
            Timer::Transfer => "transfer",
            Timer::Renew => "urgent_renewal",
            Timer::Promotion => "promotion",
            Timer::ElectionRound => "election_round",
            Timer::Campaign => "campaign",
            Timer::Heartbeat => "heartbeat",
        }
    }
}

/// The earlier of two optional deadlines (`None`: not armed).
#[inline]
fn earlier(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

impl<P: LogPosition> Node<P> {
    /// The timer table: when `timer` fires next, or `None` if it is not
    /// armed. Election timers (the round and the campaign) are frozen while
    /// a write is in flight (rule `no_candidacy_on_volatile_state`): a node
    /// never acts as a candidate on state that is not yet durable.
    #[inline(always)]
    pub(super) fn deadline(&self, timer: Timer) -> Option<Instant> {
        let frozen = self.durable.in_flight().is_some();
        match timer {
            Timer::StepDown => self.step_down_deadline(),
            Timer::LeaseEnd => self
                .lease_announced
                .and(self.phase.leadership())
                .and_then(|l| l.fence().lease_until()),
            Timer::RestartProbe => self.rollback.next_probe(),
            Timer::LeaderDeath => self
                .leader
                .filter(|_| !self.phase.is_leader())
                .and(self.gates.leader_death_at()),
            Timer::Transfer => self.handover.transfer_deadline(),
            Timer::Renew => self.phase.leadership().and_then(|l| l.renew_at()),
            Timer::Promotion => self.handover.promotion(),
            Timer::ElectionRound if frozen => None,
            Timer::ElectionRound => self.phase.round_deadline(),
            Timer::Campaign => (!frozen
                && self.phase.is_follower()
                && self.leader.is_none()
                && (self.may_ever_campaign() || self.shares_membership_when_leaderless()))
            .then(|| self.gates.earliest_campaign()),
            Timer::Heartbeat => self.phase.leadership().map(|l| l.next_heartbeat()),
        }
    }

    /// The earliest armed entry of the timer table. Only the timers the
    /// current phase can arm are read (the others are `None` by
    /// construction), each directly: this runs on every turn of a driver's
    /// loop, and debug builds check it against the table.
    pub(super) fn earliest_deadline(&self) -> Option<Instant> {
        let Phase::Leader(l) = &self.phase else {
            let frozen = self.durable.in_flight().is_some();
            let leader_death = self.leader.and(self.gates.leader_death_at());
            let round = self.phase.round_deadline().filter(|_| !frozen);
            let campaign = (!frozen && self.phase.is_follower() && self.leader.is_none())
                .then(|| self.deadline(Timer::Campaign))
                .flatten();
            let earliest = [
                self.rollback.next_probe(),
                leader_death,
                self.handover.transfer_deadline(),
                self.handover.promotion(),
                round,
            ]
            .into_iter()
            .fold(campaign, earlier);
            debug_assert_eq!(
                earliest,
                Timer::NOT_LEADING
                    .iter()
                    .filter_map(|&t| self.deadline(t))
                    .min()
            );
            return earliest;
        };
        let transfer = self.handover.transfer_deadline();
        let lease_end = self.lease_announced.and(l.fence().lease_until());
        let step_down = l
            .fence()
            .step_down_at(self.cfg.fencing, self.cfg.timing.promise_nanos);
        let earliest = [step_down, lease_end, transfer, l.renew_at()]
            .into_iter()
            .flatten()
            .fold(l.next_heartbeat(), Instant::min);
        debug_assert_eq!(
            Some(earliest),
            Timer::LEADING
                .iter()
                .filter_map(|&t| self.deadline(t))
                .min()
        );
        Some(earliest)
    }

    /// Fires every expired timer, in table order. Rule
    /// `no_candidacy_on_volatile_state`: the election timers stay frozen
    /// while a write is in flight (see [`Node::deadline`]).
    pub(super) fn on_tick(&mut self, now: Instant, out: &mut Vec<Action<P>>) {
        if self.durable.in_flight().is_some() && !self.phase.is_leader() {
            slog::debug!(self.log, "election timers frozen while a write is in flight";
                "rule" => Rule::NoCandidacyOnVolatileState, "term" => self.term);
        }
        // Only the timers the phase can arm are read. A leader that steps
        // down in this tick does not go on to the follower timers: its next
        // campaign waits a round from now, and only a deadline saturated
        // at the end of time could be due at once.
        if self.phase.is_leader() {
            self.fire_expired(Timer::LEADING, now, out);
        } else {
            self.fire_expired(Timer::NOT_LEADING, now, out);
        }
    }

    // Inlined with the timer list known, so each entry's deadline reads
    // only its own state (this runs on every tick).
    #[inline(always)]
    fn fire_expired<const N: usize>(
        &mut self,
        timers: [Timer; N],
        now: Instant,
        out: &mut Vec<Action<P>>,
    ) {
        for timer in timers {
            if let Some(deadline) = self.deadline(timer).filter(|&d| now >= d) {
                slog::debug!(self.log, "timer fired"; "timer" => timer.name(),
                    "term" => self.term, "deadline" => %deadline);
                self.fire(timer, now, out);
            }
        }
    }

    fn fire(&mut self, timer: Timer, now: Instant, out: &mut Vec<Action<P>>) {
        match timer {
            Timer::StepDown => self.fencing_step_down(out),
            // Nothing to do but notice: the step announces `LeaseLost`.
            Timer::LeaseEnd => {}
            Timer::RestartProbe => self.send_restart_probes(now, out),
            Timer::LeaderDeath => self.declare_leader_dead(out),
            Timer::Transfer => self.transfer_timed_out(now, out),
            Timer::Renew => self.urgent_renewal(now, out),
            Timer::Promotion => self.promotion_timed_out(now, out),
            Timer::ElectionRound => self.round_timed_out(now, out),
            Timer::Campaign if self.may_ever_campaign() => self.start_pre_vote(now, out),
            Timer::Campaign => self.share_membership_when_leaderless(now, out),
            Timer::Heartbeat => self.broadcast_heartbeat(now, out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Timer;

    /// The per-phase lists keep the table order and, together, name every
    /// timer: a tick reads them instead of `ALL`.
    #[test]
    fn phase_lists_cover_every_timer_in_table_order() {
        let position = |t: &Timer| Timer::ALL.iter().position(|a| a == t).unwrap();
        for list in [&Timer::LEADING[..], &Timer::NOT_LEADING[..]] {
            assert!(list.windows(2).all(|w| position(&w[0]) < position(&w[1])));
        }
        for t in Timer::ALL {
            assert!(Timer::LEADING.contains(&t) || Timer::NOT_LEADING.contains(&t));
        }
    }

    #[test]
    fn timer_names_are_distinct() {
        for (i, a) in Timer::ALL.iter().enumerate() {
            for b in &Timer::ALL[i + 1..] {
                assert_ne!(a.name(), b.name());
            }
        }
    }
}
