//! Flow key extraction (L2 walk, IPv4/IPv6, TCP/UDP ports) on arbitrary bytes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cnm_proto_fuzz::flow(data));
