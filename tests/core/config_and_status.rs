//! Configuration and observability: refused settings are named, huge
//! durations are refused or saturate, and a node reports its state and
//! logs each decision with its rule.

use std::time::Duration;

use crate::common::ms;
use crate::hand::*;
use tenure::{
    Action, Config, ConfigError, Fencing, HardState, Input, Instant, Mode, Node, Setting,
};

#[test]
fn config_errors_name_the_setting() {
    assert_eq!(Config::new(0, [1]).validate(), Err(ConfigError::ZeroId));
    assert_eq!(Config::new(1, []).validate(), Err(ConfigError::NoVoters));
    assert_eq!(
        Config::new(1, [0, 1]).validate(),
        Err(ConfigError::ZeroPeerId { list: "voters" })
    );
    assert_eq!(
        Config::new(1, [1, 2]).observers([2]).validate(),
        Err(ConfigError::ObserverIsVoter { id: 2 })
    );
    let e = Config::new(1, [1])
        .heartbeat_interval(ms(100))
        .death_timeout(ms(100))
        .validate()
        .unwrap_err();
    assert!(e.to_string().contains("death_timeout"), "{e}");
    assert_eq!(
        Config::new(1, [1]).election_timeout(ms(0)).validate(),
        Err(ConfigError::ZeroDuration {
            name: "election_timeout"
        })
    );
}

/// Every refused configuration names, as data, the setting to change, and
/// its message mentions that setting by the builder method's name.
#[test]
fn config_errors_name_the_setting_as_data() {
    let base = || Config::new(1, [1, 2, 3]);
    let cases = [
        (Config::new(0, [1]), Setting::Id),
        (Config::new(1, []), Setting::Voters),
        (Config::new(1, [0, 1]), Setting::Voters),
        (base().observers([0]), Setting::Observers),
        (base().observers([2]), Setting::Observers),
        (base().heartbeat_interval(ms(0)), Setting::HeartbeatInterval),
        (base().death_timeout(ms(0)), Setting::DeathTimeout),
        (base().election_timeout(ms(0)), Setting::ElectionTimeout),
        (base().death_timeout(ms(100)), Setting::DeathTimeout),
        (
            base()
                .heartbeat_interval(Duration::from_micros(1))
                .death_timeout(ms(400)),
            Setting::HeartbeatInterval,
        ),
        (base().election_jitter(ms(5000)), Setting::ElectionJitter),
        (base().clock_drift_ppm(2_000_000), Setting::ClockDriftPpm),
        // The default margin would leave a lease of two heartbeats: the
        // margin is what to change.
        (
            base().fencing(Fencing::Strict).lease_margin(ms(300)),
            Setting::LeaseMargin,
        ),
        (
            base().fencing(Fencing::Strict).death_timeout(ms(130)),
            Setting::DeathTimeout,
        ),
        (base().quorum(0), Setting::Quorum),
        (base().quorum(4), Setting::Quorum),
        (base().quorum(1), Setting::Quorum),
    ];
    for (config, setting) in cases {
        let e = config
            .validate()
            .expect_err(&format!("{setting:?} refused"));
        assert_eq!(e.setting(), setting, "{e}");
        let message = e.to_string();
        assert!(message.contains(setting.name()), "{setting:?}: {message}");
    }
}

#[test]
fn status_reports_volatile_and_persisted_state() {
    let mut n = node(1);
    recv(&mut n, at(500), 2, 1, vote_req());
    let st = n.status();
    assert_eq!((st.term, st.vote), (1, Some(2)));
    assert_eq!(st.persisted, HardState::default());
    assert!(st.write_in_flight);
    assert_eq!(st.mode, Mode::Candidate);
    assert_eq!(st.id, 1);
}

#[test]
fn log_lines_name_the_rule_and_node() {
    use std::sync::{Arc, Mutex};
    struct Capture(Arc<Mutex<Vec<String>>>);
    impl slog::Drain for Capture {
        type Ok = ();
        type Err = slog::Never;
        fn log(
            &self,
            record: &slog::Record<'_>,
            values: &slog::OwnedKVList,
        ) -> Result<(), slog::Never> {
            struct Kv(String);
            impl slog::Serializer for Kv {
                fn emit_arguments(
                    &mut self,
                    key: slog::Key,
                    val: &std::fmt::Arguments<'_>,
                ) -> slog::Result {
                    self.0.push_str(&format!(" {key}={val}"));
                    Ok(())
                }
            }
            let mut kv = Kv(format!("{}", record.msg()));
            slog::KV::serialize(&record.kv(), record, &mut kv).unwrap();
            slog::KV::serialize(values, record, &mut kv).unwrap();
            self.0.lock().unwrap().push(kv.0);
            Ok(())
        }
    }
    let lines = Arc::new(Mutex::new(Vec::new()));
    let logger = slog::Logger::root(Capture(lines.clone()), slog::o!());
    let mut n: Node = Node::new(
        three_voters(1).logger(logger),
        HardState::default(),
        Instant::ZERO,
    )
    .unwrap();
    drive(&mut n, at(500), rx(2, 1, vote_req()));
    let lines = lines.lock().unwrap();
    let grant = lines
        .iter()
        .find(|l| l.starts_with("vote granted"))
        .expect("a grant log line");
    assert!(grant.contains("rule=one_vote_per_term"), "{grant}");
    assert!(
        grant.contains("node=1") && grant.contains("term=1"),
        "{grant}"
    );
}

/// Huge durations are either refused by `validate` or saturate: a node
/// built with them steps, ticks and promotes without panicking, and every
/// deadline it gives is after the instant it was given at.
///
/// Guards against: durations that pass `validate` and then overflow.
#[test]
fn config_huge_durations_are_refused_or_saturate() {
    let huge = std::time::Duration::MAX;
    let configs = [
        Config::new(1, [1, 2, 3]).election_timeout(huge),
        Config::new(1, [1, 2, 3])
            .election_timeout(huge)
            .election_jitter(huge),
        Config::new(1, [1, 2, 3]).death_timeout(huge),
        Config::new(1, [1, 2, 3]).heartbeat_interval(huge),
        Config::new(1, [1, 2, 3])
            .heartbeat_interval(huge)
            .death_timeout(huge),
        Config::new(1, [1])
            .heartbeat_interval(ms(1))
            .lease_margin(huge),
        Config::new(1, [1])
            .fencing(Fencing::Strict)
            .death_timeout(huge),
    ];
    let mut accepted = 0;
    for c in configs {
        let Ok(mut n) = Node::<()>::new(c.clone(), HardState::default(), Instant::ZERO) else {
            continue;
        };
        accepted += 1;
        let mut now = Instant::ZERO;
        for _ in 0..50 {
            for input in [Input::Promote, Input::Tick] {
                for a in n.step(now, input) {
                    if let Action::Persist(s) = a {
                        n.step(now, Input::Persisted(s));
                    }
                }
            }
            match n.next_deadline() {
                Some(d) if d > now => now = d,
                Some(d) => panic!("{c:?}: deadline {d:?} is not after {now:?}"),
                None => break,
            }
        }
    }
    assert!(
        accepted >= 3,
        "the test must run huge durations, not only refuse them"
    );
}
