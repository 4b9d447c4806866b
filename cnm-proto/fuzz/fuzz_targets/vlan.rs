//! 802.1Q tag view and repr on arbitrary bytes.
#![no_main]

use cnm_proto::wire::{VlanRepr, VlanTag};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(t) = VlanTag::new_checked(data) {
        let _ = (
            t.tci(),
            t.pcp(),
            t.dei(),
            t.vid(),
            t.ethertype(),
            t.payload(),
        );
        let r = VlanRepr::parse(&t).expect("a checked view parses");
        let mut buf = [0u8; 4];
        r.emit(&mut VlanTag::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[..], &data[..4], "emit(parse(x)) == x");
    }
});
