//! Where the workspace's binaries are: next to the running program, in the same cargo target
//! directory (`target/<profile>/`). A test binary runs from `target/<profile>/deps/`, so the
//! directory above is used for it. The bench, the runner and the real-network tests all find
//! `cp-switch`, `rp-agent` and `cnm-dump` this way.

use std::path::PathBuf;

/// The directory holding the workspace's binaries (`.` if the running program's path is
/// unknown).
pub fn dir() -> PathBuf {
    let mut d = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("."));
    if d.file_name().is_some_and(|n| n == "deps") {
        d.pop();
    }
    d
}

/// The path of the workspace binary `name` (it may not exist: the caller says what to build).
pub fn path(name: &str) -> PathBuf {
    dir().join(name)
}

#[cfg(test)]
mod tests {
    #[test]
    fn test_binaries_look_above_deps() {
        // This unit test runs from target/<profile>/deps/.
        let d = super::dir();
        assert_ne!(d.file_name().and_then(|n| n.to_str()), Some("deps"));
        assert_eq!(super::path("cp-switch"), d.join("cp-switch"));
    }
}
