#!/usr/bin/env bash
# The project's whole test suite: installs what is missing, then format check, clippy with
# warnings as errors, and every test of every crate (real-network tests included when run as
# root; they print a reason and skip otherwise).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/install-deps.sh

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --quiet -- -D warnings
echo "== cargo build --release (binaries used by the real-network tests)"
cargo build --workspace --release --quiet
echo "== cargo test"
cargo test --workspace --release
