//! Ethernet header view and the one-pass L2 walk on arbitrary bytes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cnm_proto_fuzz::ethernet(data));
