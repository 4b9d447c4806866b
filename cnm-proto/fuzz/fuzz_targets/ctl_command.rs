//! The control-socket command parsers of both daemons on arbitrary text.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cnm_proto_fuzz::ctl_command(data));
