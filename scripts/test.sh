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
echo "== cargo build --release (the shipped binaries: fat LTO, see Cargo.toml)"
cargo build --workspace --release --quiet
echo "== cargo build --profile ci (release optimisation without LTO: the binaries the tests run)"
cargo build --workspace --profile ci --quiet
echo "== cargo test --profile ci"
cargo test --workspace --profile ci
echo "== scripts/build-pgo.sh (the profile-guided build: its outputs must be the plain build's)"
pgo=0
# The testbed alone: the daemons' builds are the same commands for other packages, and the
# suite's time is better spent on the check.
scripts/build-pgo.sh --testbed-only || pgo=$?
if [ "$pgo" = 3 ]; then
    echo "skipped: the toolchain's llvm-tools (llvm-profdata) could not be installed"
elif [ "$pgo" != 0 ]; then
    exit "$pgo"
fi
