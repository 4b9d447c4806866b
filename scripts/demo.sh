#!/usr/bin/env bash
# The project's demo: builds the workspace, writes a capture of frames emitted by cnm-proto
# (CN-tagged data, CNMs built from them, PAUSE, PFC, LLDP with the CN TLV, rate feedback and one
# deliberately malformed CNM) and decodes it three ways: cnm-dump as text, cnm-dump as JSON,
# and tshark with the project's Wireshark dissector.
#
# Output goes to results/demo/ (override with RESULTS_DIR).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

results="${RESULTS_DIR:-results/demo}"
target="${CARGO_TARGET_DIR:-target}"

scripts/install-deps.sh

if ! command -v cargo >/dev/null 2>&1; then
  echo "demo: cargo not found; install Rust (https://rustup.rs) and run again" >&2
  exit 1
fi

echo "== cargo build --release"
cargo build --release --workspace --quiet
cargo build --release -p cnm-proto --example demo_pcap --quiet

mkdir -p "$results"
pcap="$results/demo.pcap"
"$target/release/examples/demo_pcap" "$pcap"
echo "wrote $pcap"

echo
echo "== cnm-dump $pcap"
"$target/release/cnm-dump" "$pcap"

echo
echo "== cnm-dump --json $pcap | head -n 4"
"$target/release/cnm-dump" --json "$pcap" | head -n 4

echo
if command -v tshark >/dev/null 2>&1; then
  # install-deps.sh installed the dissector as a personal plugin, so plain tshark decodes
  # CN-TAG, CNM and rate feedback; fall back to loading it explicitly if that did not happen.
  lua=()
  if ! tshark -G protocols 2>/dev/null | grep -q -P '\tcnm$'; then
    lua=(-X "lua_script:scripts/wireshark/qcn.lua")
  fi
  echo "== tshark${lua[*]:+ ${lua[*]}} -r $pcap"
  tshark "${lua[@]}" -r "$pcap" 2>/dev/null | tee "$results/tshark.txt"
else
  echo "demo: tshark not installed; skipping the Wireshark decoding" >&2
fi
