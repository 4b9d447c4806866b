//! Helpers shared by the integration tests. Each test file uses only part of them, hence the
//! `dead_code` allowance.
#![allow(dead_code, clippy::unwrap_used)]

pub mod netns;
pub mod repro;
pub mod sim;
pub mod switch_lab;

/// Every `.pcap` file a run wrote under `dir` (`testbed::run::files_under`).
pub fn pcaps_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    testbed::run::files_under(dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "pcap"))
        .collect()
}
