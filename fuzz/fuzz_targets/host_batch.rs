//! The host batch decoder on arbitrary bytes: typed errors only, never a
//! panic; whatever decodes survives a re-encode (in one or more
//! datagrams) and decode unchanged.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tenure::adapters::host_wire::{decode_batch, encode_batch};
use tenure::host::Batch;

fuzz_target!(|bytes: &[u8]| {
    if let Ok((from, batch)) = decode_batch::<u64>(bytes, 7, 2) {
        let frames = encode_batch(7, from, 2, &batch).expect("a decoded batch re-encodes");
        let mut entries = Vec::new();
        for (i, frame) in frames.iter().enumerate() {
            let (again_from, part): (u64, Batch<u64>) =
                decode_batch(frame, 7, 2).expect("and each datagram decodes again");
            assert_eq!(again_from, from);
            if i == 0 {
                assert_eq!(part.liveness.is_some(), batch.liveness.is_some());
            }
            entries.extend(part.entries);
        }
        assert_eq!(entries, batch.entries);
    }
    let _ = decode_batch::<()>(bytes, 7, 2);
    let _ = decode_batch::<(u64, u64)>(bytes, 7, 2);
});
