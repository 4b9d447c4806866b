//! rp-agent.
#![forbid(unsafe_code)]
