#!/usr/bin/env bash
# Installs what the project needs on a fresh machine: the network tools the real-network tests
# and the demo drive, and the Rust components the test command runs. Idempotent and quiet when
# everything is already there.
set -euo pipefail

need_apt=()
have() { command -v "$1" >/dev/null 2>&1; }
have ip || need_apt+=(iproute2)
have ethtool || need_apt+=(ethtool)
have iperf3 || need_apt+=(iperf3)
have tshark || need_apt+=(tshark)
have ping || need_apt+=(iputils-ping)
have jq || need_apt+=(jq)
have curl || need_apt+=(curl)
# promtool (from Debian's prometheus package) lints both daemons' metrics in the tests.
have promtool || need_apt+=(prometheus)
# Mininet (its Python package and mnexec) for the Mininet integration test.
have mnexec || need_apt+=(mininet)
# The testbed's plots render their text with DejaVu Sans.
[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need_apt+=(fonts-dejavu-core)

if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing ${need_apt[*]}; run as root to install them with apt-get" >&2
  else
    echo "install-deps: installing ${need_apt[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # tshark asks whether non-root users may capture; answer "no" without a prompt.
    echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections || true
    apt-get install -y -qq "${need_apt[@]}" >/dev/null
  fi
fi

if have rustup; then
  rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
  rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
fi

# The Wireshark dissector, so that tshark and Wireshark decode CN-TAG, CNM and rate feedback.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ -x "$here/install-wireshark-dissector.sh" ]; then
  "$here/install-wireshark-dissector.sh" >/dev/null
fi
