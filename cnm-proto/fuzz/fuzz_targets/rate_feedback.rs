//! Rate feedback message view and repr on arbitrary bytes.
#![no_main]

use cnm_proto::wire::{RateFeedback, RateFeedbackRepr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = RateFeedback::new_checked(data) {
        let _ = (m.reserved(), m.encap_priority_field());
        let r = RateFeedbackRepr::parse(&m).expect("a checked view parses");
        let mut buf = [0u8; 26];
        r.emit(&mut RateFeedback::new_unchecked(&mut buf[..]));
        let again = RateFeedbackRepr::parse(&RateFeedback::new_checked(&buf[..]).expect("checks"));
        assert_eq!(again, Ok(r), "parse(emit(r)) == r");
    }
});
