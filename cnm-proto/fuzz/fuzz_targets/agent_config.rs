//! The agent's configuration loader (TOML onto `AgentConfig`, validation) on arbitrary text.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cnm_proto_fuzz::agent_config(data));
