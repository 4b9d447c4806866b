//! The switch's configuration loader (TOML onto `BridgeConfig`, validation) on arbitrary text.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cnm_proto_fuzz::switch_config(data));
