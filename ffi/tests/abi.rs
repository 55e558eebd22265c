//! The C ABI called from Rust: its error model (codes, messages, `NULL`s,
//! unknown enum values), the state records, and a single-voter node driven
//! to leadership through the action queue.

use std::ffi::CStr;
use std::ptr::{null, null_mut};

use tenure_ffi::*;

mod common;
use common::take;

fn config(id: u64, voters: &[u64]) -> *mut TenureConfig {
    // SAFETY: `voters` is a live slice.
    let config = unsafe { tenure_config_new(id, voters.as_ptr(), voters.len()) };
    assert!(!config.is_null());
    config
}

fn input(kind: TenureInputKind) -> TenureInput {
    TenureInput {
        kind: kind as u32,
        bytes: null(),
        len: 0,
        from_addr: null(),
        state: TenureHardState::default(),
        to: 0,
        position: 0,
        membership: TenureMembershipId::default(),
        change: 0,
        member: 0,
        old: 0,
        address: null(),
    }
}

/// The error `tenure_node_new` gives for `c` (freed) after `setup` ran
/// on it; the node must not be made.
fn refused(c: *mut TenureConfig, setup: impl FnOnce(*mut TenureConfig)) -> (TenureCode, String) {
    setup(c);
    let mut err = null_mut();
    // SAFETY: `c` is live until freed here; `err` is writable.
    let node = unsafe {
        let node = tenure_node_new(c, TenureHardState::default(), 0, &mut err);
        tenure_config_free(c);
        node
    };
    assert!(node.is_null());
    take(&mut err)
}

/// Sets with `set` on `c`, which must succeed.
fn ok(set: impl FnOnce(*mut *mut TenureError) -> TenureCode) {
    let mut err = null_mut();
    assert_eq!(set(&mut err), TenureCode::Ok);
}

#[test]
fn node_new_refuses_a_bad_configuration_naming_the_setting() {
    let (code, message) = refused(config(1, &[1, 2, 3]), |c| {
        // SAFETY: `c` is live; `err` is writable.
        ok(|err| unsafe { tenure_config_set_heartbeat_ms(c, 500, err) });
        // SAFETY: as above.
        ok(|err| unsafe { tenure_config_set_death_timeout_ms(c, 400, err) });
    });
    assert_eq!(code, TenureCode::InvalidConfig);
    assert!(
        message.contains("death_timeout (400 ms) must be longer than heartbeat_interval (500 ms)"),
        "{message}"
    );
    assert!(message.contains("setting `death_timeout`"), "{message}");
}

/// Every other voter and observer needs an address: a node that could
/// never reach one is refused, naming it.
///
/// Guards against: a member left out of `tenure_config_add_peer` (or a
/// mistyped id) that the node silently never contacts.
#[test]
fn node_new_refuses_a_member_without_an_address() {
    let (code, message) = refused(config(1, &[1, 2, 3]), |c| {
        let observers = [4u64];
        // SAFETY: `c` is live; `observers` a live array; `err` writable.
        ok(|err| unsafe { tenure_config_set_observers(c, observers.as_ptr(), 1, err) });
        // SAFETY: as above, with a literal address.
        ok(|err| unsafe { tenure_config_add_peer(c, 2, c"127.0.0.1:7002".as_ptr(), err) });
    });
    assert_eq!(code, TenureCode::InvalidConfig);
    assert!(message.contains("no address for member 3, 4"), "{message}");
}

#[test]
fn null_pointers_are_errors_not_crashes() {
    let mut err = null_mut();
    // SAFETY: NULL handles are what is under test; `err` is writable.
    unsafe {
        let tick = input(TenureInputKind::Tick);
        assert_eq!(
            tenure_node_step(null_mut(), 0, &tick, &mut err),
            TenureCode::NullPointer
        );
        assert_eq!(
            take(&mut err),
            (TenureCode::NullPointer, "node is NULL".into())
        );
        assert_eq!(
            tenure_config_set_seed(null_mut(), 1, null_mut()),
            TenureCode::NullPointer
        );
        assert!(
            tenure_config_new(1, null(), 3).is_null(),
            "voters NULL with a length"
        );
        assert!(!tenure_actions_next(null_mut(), null_mut()));
        assert_eq!(tenure_node_next_deadline_ns(null()), TENURE_NO_DEADLINE);
        assert!(!tenure_node_lease(null(), 0, null_mut()));
        assert_eq!(CStr::from_ptr(tenure_error_message(null())), c"no error");
        tenure_node_free(null_mut());
        tenure_config_free(null_mut());
        tenure_error_free(null_mut());
    }
}

#[test]
fn unknown_enum_values_and_bad_addresses_are_invalid_arguments() {
    let c = config(1, &[1]);
    let mut err = null_mut();
    // SAFETY: `c` is live until freed; the strings are literals.
    unsafe {
        assert_eq!(
            tenure_config_set_mode(c, 9, &mut err),
            TenureCode::InvalidArgument
        );
        assert_eq!(take(&mut err).1, "9 is not a mode value");
        assert_eq!(
            tenure_config_set_fencing(c, 3, &mut err),
            TenureCode::InvalidArgument
        );
        assert_eq!(take(&mut err).1, "3 is not a fencing value");
        let code = tenure_config_add_peer(c, 2, c"localhost".as_ptr(), &mut err);
        assert_eq!(code, TenureCode::InvalidArgument);
        assert!(
            take(&mut err)
                .1
                .contains("peer 2: address \"localhost\" is not ip:port")
        );
        let node = tenure_node_new(c, TenureHardState::default(), 0, &mut err);
        tenure_config_free(c);
        let mut odd = input(TenureInputKind::Tick);
        odd.kind = 99;
        assert_eq!(
            tenure_node_step(node, 0, &odd, &mut err),
            TenureCode::InvalidArgument
        );
        assert_eq!(take(&mut err).1, "99 is not an input kind");
        let mut position = input(TenureInputKind::LogPosition);
        position.position = 5;
        assert_eq!(
            tenure_node_step(node, 0, &position, &mut err),
            TenureCode::InvalidArgument
        );
        assert!(take(&mut err).1.contains("made without log positions"));
        tenure_node_free(node);
    }
}

#[test]
fn a_datagram_that_is_not_a_frame_is_dropped_with_its_reason() {
    let c = config(2, &[1, 2, 3]);
    let mut err = null_mut();
    // SAFETY: `c` and `node` are live until freed; the datagram is a local.
    unsafe {
        for (id, addr) in [(1, c"127.0.0.1:7001"), (3, c"127.0.0.1:7003")] {
            assert_eq!(
                tenure_config_add_peer(c, id, addr.as_ptr(), &mut err),
                TenureCode::Ok
            );
        }
        let node = tenure_node_new(c, TenureHardState::default(), 0, &mut err);
        tenure_config_free(c);
        let garbage = *b"not a tenure frame";
        let mut receive = input(TenureInputKind::Receive);
        (receive.bytes, receive.len, receive.from_addr) =
            (garbage.as_ptr(), garbage.len(), c"127.0.0.1:7001".as_ptr());
        assert_eq!(
            tenure_node_step(node, 0, &receive, &mut err),
            TenureCode::Dropped
        );
        assert_eq!(take(&mut err).1, "datagram dropped: malformed");
        let mut drops = TenureDrops::default();
        assert_eq!(
            tenure_node_drops(node, &mut drops, &mut err),
            TenureCode::Ok
        );
        assert_eq!(drops.malformed, 1);
        tenure_node_free(node);
    }
}

#[test]
fn state_records_round_trip_and_a_short_buffer_gets_the_needed_length() {
    let state = TenureHardState { term: 7, vote: 3 };
    let mut err = null_mut();
    let mut buf = [0u8; TENURE_STATE_RECORD_MAX];
    let mut len = 0;
    // SAFETY: `buf`, `len` and `err` are live locals, `buf` as long as given.
    unsafe {
        assert_eq!(
            tenure_state_encode(3, 9, state, buf.as_mut_ptr(), 4, &mut len, &mut err),
            TenureCode::BufferTooSmall
        );
        let (code, message) = take(&mut err);
        assert_eq!(code, TenureCode::BufferTooSmall);
        assert!(
            message.contains(&format!("the record is {len} bytes, the buffer 4")),
            "{message}"
        );
        assert_eq!(
            tenure_state_encode(3, 9, state, buf.as_mut_ptr(), buf.len(), &mut len, &mut err),
            TenureCode::Ok
        );
        let (mut back, mut node, mut cluster) = (TenureHardState::default(), 0, 0);
        assert_eq!(
            tenure_state_decode(
                buf.as_ptr(),
                len,
                &mut back,
                &mut node,
                &mut cluster,
                &mut err
            ),
            TenureCode::Ok
        );
        assert_eq!((back, node, cluster), (state, 3, 9));
        buf[6] ^= 1;
        let code = tenure_state_decode(
            buf.as_ptr(),
            len,
            &mut back,
            null_mut(),
            null_mut(),
            &mut err,
        );
        assert_eq!(code, TenureCode::BadState);
        assert!(take(&mut err).1.starts_with("state record: "));
    }
}

#[test]
fn a_single_voter_elects_itself_through_the_action_queue() {
    let c = config(1, &[1]);
    let mut err = null_mut();
    // SAFETY: `c` and `node` are live until freed; actions are read before
    // the next `tenure_actions_next`.
    unsafe {
        let node = tenure_node_new(c, TenureHardState::default(), 0, &mut err);
        tenure_config_free(c);
        assert!(!node.is_null());
        let mut stored = TenureHardState::default();
        let mut won = None;
        for _ in 0..10 {
            let now = tenure_node_next_deadline_ns(node);
            assert_ne!(now, TENURE_NO_DEADLINE, "a follower waits for a leader");
            assert_eq!(
                tenure_node_step(node, now, &input(TenureInputKind::Tick), &mut err),
                TenureCode::Ok
            );
            let mut a = std::mem::zeroed::<TenureAction>();
            while tenure_actions_next(node, &mut a) {
                match a.kind {
                    TenureActionKind::Persist => {
                        stored = a.state;
                        let mut done = input(TenureInputKind::Persisted);
                        done.state = a.state;
                        assert_eq!(tenure_node_step(node, now, &done, &mut err), TenureCode::Ok);
                    }
                    TenureActionKind::Event if a.event.kind == TenureEventKind::BecameLeader => {
                        won = Some(a.event.token);
                        let text = CStr::from_ptr(a.event.description).to_string_lossy();
                        assert!(text.starts_with("BecameLeader"), "{text}");
                    }
                    _ => {}
                }
            }
            if won.is_some() {
                break;
            }
        }
        let token = won.expect("it won within ten deadlines");
        assert_eq!((token.leader, stored.vote), (1, 1));
        assert_eq!(token.term, stored.term);
        let mut status = std::mem::zeroed::<TenureStatus>();
        assert_eq!(
            tenure_node_status(node, &mut status, &mut err),
            TenureCode::Ok
        );
        assert_eq!(
            (status.role, status.term, status.leader),
            (TenureRole::Leader, token.term, 1)
        );
        let mut held = TenureToken::default();
        assert!(tenure_node_token(node, &mut held));
        assert_eq!(held, token);
        assert!(tenure_node_admits(node, token));
        assert!(
            !tenure_node_lease(node, 0, null_mut()),
            "soft fencing holds no lease"
        );
        tenure_node_free(node);
    }
}
