#!/usr/bin/env bash
# Installs the CN-TAG / CNM / rate-feedback dissector (scripts/wireshark/qcn.lua) as a personal
# Lua plugin, so that Wireshark and tshark decode EtherTypes 0x22E9, 0x22E7 and 0x88B5 without
# any -X flag.
#
# Wireshark 4.x loads personal Lua plugins from ~/.local/lib/wireshark/plugins/ (see
# `tshark -G folders`, "Personal Lua Plugins"); "~" is $HOME. Debian's init.lua sets
# run_user_scripts_when_superuser = true, so root's tshark loads them as well.
#
#   * run as a normal user: installs into that user's folder;
#   * run as root: installs into root's folder ($HOME, normally /root) and, when started through
#     sudo, also into the invoking user's folder (owned by that user), since "sudo" may or may not
#     keep HOME.
#
# The copy is never installed into the global plugin folder: a personal copy plus a global copy
# would be loaded twice. Idempotent. Prints where it installed; --uninstall removes the copies.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="$here/wireshark/qcn.lua"
name="qcn.lua"
mode="install"
if [ "${1:-}" = "--uninstall" ]; then
  mode="uninstall"
elif [ $# -gt 0 ]; then
  echo "usage: $0 [--uninstall]" >&2
  exit 2
fi

if [ ! -r "$src" ]; then
  echo "install-wireshark-dissector: $src not found" >&2
  exit 1
fi

home_of() { getent passwd "$1" | cut -d: -f6; }

# Homes to install into, one per line, each with its owner.
targets=()
my_home="${HOME:-}"
if [ -z "$my_home" ] || [ ! -d "$my_home" ]; then
  my_home="$(home_of "$(id -un)")"
fi
targets+=("$(id -un):$my_home")
if [ "$(id -u)" -eq 0 ] && [ -n "${SUDO_USER:-}" ] && [ "$SUDO_USER" != "root" ]; then
  sudo_home="$(home_of "$SUDO_USER")"
  if [ -n "$sudo_home" ] && [ -d "$sudo_home" ] && [ "$sudo_home" != "$my_home" ]; then
    targets+=("$SUDO_USER:$sudo_home")
  fi
fi

for t in "${targets[@]}"; do
  owner="${t%%:*}"
  home="${t#*:}"
  dir="$home/.local/lib/wireshark/plugins"
  if [ "$mode" = "uninstall" ]; then
    rm -f "$dir/$name"
    echo "removed $dir/$name"
    continue
  fi
  if [ "$owner" = "$(id -un)" ]; then
    install -d -m 0755 "$dir"
    install -m 0644 "$src" "$dir/$name"
  else
    # Root installing for the sudo user: create the folders as that user so they stay theirs.
    group="$(id -gn "$owner")"
    for d in "$home/.local" "$home/.local/lib" "$home/.local/lib/wireshark" "$dir"; do
      [ -d "$d" ] || install -d -m 0755 -o "$owner" -g "$group" "$d"
    done
    install -m 0644 -o "$owner" -g "$group" "$src" "$dir/$name"
  fi
  echo "installed $dir/$name"
done

if [ "$mode" = "install" ] && command -v tshark >/dev/null 2>&1; then
  # Check that this user's tshark now knows the protocols.
  if tshark -G protocols 2>/dev/null | grep -q -P '\tcnm$'; then
    echo "tshark loads the dissector (protocols cntag, cnm, ratefb)"
  else
    echo "install-wireshark-dissector: warning: tshark does not list the cnm protocol;" \
      "check 'tshark -G folders' for the personal Lua plugin folder" >&2
  fi
fi
