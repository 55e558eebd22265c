//! The wire decoder and the state-file decoder on arbitrary bytes: typed
//! errors only, never a panic; whatever decodes survives a re-encode and
//! decode unchanged (postcard accepts non-minimal varints, so the bytes
//! themselves may differ).

#![no_main]

use libfuzzer_sys::fuzz_target;
use tenure::adapters::codec::{decode, encode};
use tenure::adapters::storage::{decode_owned_record, encode_owned_record, encode_record};
use tenure::{Message, VClock};

fuzz_target!(|bytes: &[u8]| {
    if let Ok((from, message)) = decode::<u64>(bytes, 7, 2) {
        let frame = encode(7, from, 2, &message).expect("a decoded message re-encodes");
        let again: (u64, Message<u64>) = decode(&frame, 7, 2).expect("and decodes again");
        assert_eq!(again, (from, message));
    }
    let _ = decode::<VClock>(bytes, 7, 2);
    let _ = decode::<(u64, u64)>(bytes, 7, 2);
    if let Ok((owner, state)) = decode_owned_record(bytes) {
        let again = match owner {
            Some(owner) => encode_owned_record(owner, &state),
            None => encode_record(&state),
        };
        assert_eq!(decode_owned_record(&again).ok(), Some((owner, state)));
    }
});
