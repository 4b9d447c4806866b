//! CN-TAG view and repr on arbitrary bytes.
#![no_main]

use cnm_proto::wire::{CnTag, CnTagRepr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(t) = CnTag::new_checked(data) {
        let _ = (t.rpid(), t.ethertype(), t.payload());
        let r = CnTagRepr::parse(&t).expect("a checked view parses");
        let mut buf = [0u8; 4];
        r.emit(&mut CnTag::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[..], &data[..4], "emit(parse(x)) == x");
    }
});
