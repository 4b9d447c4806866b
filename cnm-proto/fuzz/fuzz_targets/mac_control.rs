//! MAC Control (PAUSE / PFC) view and repr on arbitrary bytes.
#![no_main]

use cnm_proto::wire::{MacControl, MacControlRepr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = MacControl::new_checked(data) {
        let _ = (
            m.opcode(),
            m.pause_time(),
            m.class_enable(),
            m.pfc_times(),
            m.reserved(),
        );
        let r = MacControlRepr::parse(&m).expect("a checked view parses");
        let mut buf = [0u8; 46];
        r.emit(&mut MacControl::new_unchecked(&mut buf[..]));
        let again = MacControlRepr::parse(&MacControl::new_checked(&buf[..]).expect("checks"));
        assert_eq!(again, Ok(r), "parse(emit(r)) == r");
    }
});
