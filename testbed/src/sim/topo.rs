//! Topology files.
