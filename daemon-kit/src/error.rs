//! Why a daemon could not start or stopped, and the exit status that tells a caller which.
//!
//! Every binary of the workspace follows one rule: an invalid configuration (a flag, a file, an
//! interface name that does not exist) exits with status 2 after one message naming what is
//! wrong; a failure at run time exits with status 1.

/// Exit status of a refused configuration.
pub const EXIT_CONFIG: i32 = 2;
/// Exit status of a run-time failure.
pub const EXIT_RUNTIME: i32 = 1;

/// Why a daemon could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// Invalid configuration (exit status 2).
    #[error("{0}")]
    Config(String),
    /// A run-time failure (exit status 1).
    #[error("{0}")]
    Runtime(String),
}

impl DaemonError {
    /// The process exit status for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            DaemonError::Config(_) => EXIT_CONFIG,
            DaemonError::Runtime(_) => EXIT_RUNTIME,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configuration_errors_exit_2() {
        assert_eq!(DaemonError::Config("x".into()).exit_code(), 2);
        assert_eq!(DaemonError::Runtime("x".into()).exit_code(), 1);
        assert_eq!(DaemonError::Config("port p9".into()).to_string(), "port p9");
    }
}
