//! The bridge core fed with arbitrary frames on three ports.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cnm_proto_fuzz::bridge(data));
