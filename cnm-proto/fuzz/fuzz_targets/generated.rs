//! The generated frames' departure stamp (`cnm_proto::wire::generated`) on arbitrary bytes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cnm_proto_fuzz::generated(data));
