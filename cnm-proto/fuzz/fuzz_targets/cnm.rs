//! CNM PDU view, repr and whole-frame parser on arbitrary bytes; the CNM builder with
//! parameters and sampled frame taken from the input.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cnm_proto_fuzz::cnm(data));
