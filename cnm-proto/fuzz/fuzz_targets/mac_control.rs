//! MAC Control (PAUSE / PFC) view and repr on arbitrary bytes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cnm_proto_fuzz::mac_control(data));
