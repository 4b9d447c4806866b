//! LLDP CN TLV view and repr, and the TLV walk of a whole LLDPDU, on arbitrary bytes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cnm_proto_fuzz::lldp_cn(data));
