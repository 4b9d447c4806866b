//! Helpers shared by the integration tests. Each test file uses only part of them, hence the
//! `dead_code` allowance.
#![allow(dead_code, clippy::unwrap_used)]

pub mod netns;
pub mod repro;
pub mod switch_lab;
