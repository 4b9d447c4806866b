//! Flow key extraction (L2 walk, IPv4/IPv6, TCP/UDP ports) on arbitrary bytes.
#![no_main]

use cnm_proto::wire::{walk, FlowKey};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let default = data.first().copied().unwrap_or(0) & 7;
    match (FlowKey::extract(data, default), walk(data)) {
        (Ok(k), Ok(i)) => {
            assert_eq!((k.src, k.dst), (i.src, i.dst));
            assert_eq!(k.priority, i.priority(default));
        }
        (Err(a), Err(b)) => assert_eq!(a, b),
        _ => panic!("FlowKey::extract fails exactly when walk does"),
    }
});
