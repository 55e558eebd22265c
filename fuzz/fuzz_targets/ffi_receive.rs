//! The C ABI's receive path on arbitrary bytes: node 2 of cluster 7 (with
//! and without log positions), made through `tenure_config_new` and
//! `tenure_node_new`, takes the input as a datagram from node 1's address
//! and then ticks; every action is read. No call returns
//! `TENURE_CODE_PANIC`; a datagram is taken or dropped, nothing else; and
//! the same bytes as a state record and as a membership record decode or
//! are refused as damaged.

#![no_main]

use std::ptr::null_mut;

use libfuzzer_sys::fuzz_target;
use tenure_ffi::*;

fn node(positions: bool) -> *mut TenureNode {
    let voters = [1u64, 2, 3];
    // SAFETY: the pointers are to live locals and literals; every handle
    // is used once and freed by its own function.
    unsafe {
        let config = tenure_config_new(2, voters.as_ptr(), voters.len());
        assert_eq!(tenure_config_set_cluster_id(config, 7, null_mut()), TenureCode::Ok);
        assert_eq!(tenure_config_set_log_positions(config, positions, null_mut()), TenureCode::Ok);
        for (id, addr) in [(1, c"127.0.0.1:7001"), (3, c"127.0.0.1:7003")] {
            assert_eq!(tenure_config_add_peer(config, id, addr.as_ptr(), null_mut()), TenureCode::Ok);
        }
        let node = tenure_node_new(config, TenureHardState::default(), 0, null_mut());
        tenure_config_free(config);
        assert!(!node.is_null());
        node
    }
}

fn drain(node: *mut TenureNode) {
    let mut action = std::mem::MaybeUninit::<TenureAction>::uninit();
    // SAFETY: `node` is live; `action` is writable.
    while unsafe { tenure_actions_next(node, action.as_mut_ptr()) } {}
}

fuzz_target!(|bytes: &[u8]| {
    for positions in [false, true] {
        let node = node(positions);
        let input = TenureInput {
            kind: TenureInputKind::Receive as u32,
            bytes: bytes.as_ptr(),
            len: bytes.len(),
            from_addr: c"127.0.0.1:7001".as_ptr(),
            state: TenureHardState::default(),
            to: 0,
            position: 0,
            membership: TenureMembershipId::default(),
            change: 0,
            member: 0,
            old: 0,
            address: std::ptr::null(),
        };
        // SAFETY: `input` points to `bytes` and a literal, both live.
        let code = unsafe { tenure_node_step(node, 1_000_000, &input, null_mut()) };
        assert!(matches!(code, TenureCode::Ok | TenureCode::Dropped), "{code:?}");
        drain(node);
        let tick = TenureInput { kind: TenureInputKind::Tick as u32, ..input };
        // SAFETY: as above.
        let code = unsafe { tenure_node_step(node, 2_000_000_000, &tick, null_mut()) };
        assert_eq!(code, TenureCode::Ok);
        drain(node);
        // SAFETY: `node` came from `tenure_node_new` and is freed once.
        unsafe { tenure_node_free(node) };
    }
    let mut state = TenureHardState::default();
    // SAFETY: `bytes` is live; `state` is writable; the owner is not asked.
    let code = unsafe {
        tenure_state_decode(bytes.as_ptr(), bytes.len(), &mut state, null_mut(), null_mut(), null_mut())
    };
    assert!(matches!(code, TenureCode::Ok | TenureCode::BadState), "{code:?}");
    let voters = [1u64, 2, 3];
    // SAFETY: `voters` and `bytes` are live; the configuration is freed once.
    unsafe {
        let config = tenure_config_new(2, voters.as_ptr(), voters.len());
        let code = tenure_config_set_membership(config, bytes.as_ptr(), bytes.len(), null_mut());
        assert!(matches!(code, TenureCode::Ok | TenureCode::BadState), "{code:?}");
        tenure_config_free(config);
    }
});
