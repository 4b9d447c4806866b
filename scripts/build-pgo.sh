#!/usr/bin/env bash
# Builds the workspace's release binaries with profile-guided optimisation (PGO) into
# `target/pgo/release/`: the same code as `cargo build --release`, laid out and inlined after
# a training run of the simulator on the built-in scenarios.
#
# Why: the simulator's profile is flat (no function above 3 % of the instructions), so what is
# left to win is spread over every branch and call of the cores and the engine; PGO places the
# hot paths of all of them at once. On the 4-flow 10 Gb/s dumbbell it cut the CPU per
# simulated second by about a fifth (README, "Design": "Profile-guided build").
#
# The results do not change: the build's floating point is not reassociated (no fast-math),
# so a PGO binary computes what the plain one does. The script checks it: the dumbbell's
# summary (its wall-clock figures aside) and trace, and the parking lot's trace, summary and
# tables, from both builds must be byte for byte the same, or it fails.
#
# Usage: scripts/build-pgo.sh [--no-check] [--testbed-only]
#   --no-check       skip the comparison with the plain release build (and that build)
#   --testbed-only   build only the testbed with the profile, not the daemons (which a PGO
#                    testbed needs beside it for namespace runs)
#
# Needs the toolchain's `llvm-profdata` (rustup component `llvm-tools`, added when missing;
# exit status 3 when it cannot be had, 1 on any other failure).
set -euo pipefail
cd "$(dirname "$0")/.."

check=1
packages="testbed cp-switch rp-agent cnm-dump"
for a in "$@"; do
    case "$a" in
        --no-check) check=0 ;;
        --testbed-only) packages=testbed ;;
        -h | --help)
            # The comment at the top of this file, up to its first line of code.
            awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"
            exit 0
            ;;
        *)
            echo "build-pgo: unknown argument '$a' (see --help)" >&2
            exit 2
            ;;
    esac
done

say() { echo "build-pgo: $*" >&2; }

find_profdata() {
    local sysroot host
    sysroot=$(rustc --print sysroot)
    host=$(rustc -vV | sed -n 's/^host: //p')
    local p="$sysroot/lib/rustlib/$host/bin/llvm-profdata"
    [ -x "$p" ] && echo "$p"
}

profdata=$(find_profdata || true)
if [ -z "$profdata" ]; then
    say "adding the rustup component llvm-tools (for llvm-profdata)"
    if ! rustup component add llvm-tools >&2; then
        say "cannot add llvm-tools; install it with 'rustup component add llvm-tools'"
        exit 3
    fi
    profdata=$(find_profdata || true)
    if [ -z "$profdata" ]; then
        say "llvm-profdata not found in the toolchain after adding llvm-tools"
        exit 3
    fi
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
raw="$work/raw"
mkdir -p "$raw"

# Separate target directories: RUSTFLAGS changes every crate's build, and the plain
# `target/release` stays as it is.
say "1/3 instrumented build (target/pgo-gen)"
RUSTFLAGS="-Cprofile-generate=$raw" cargo build --release -p testbed --target-dir target/pgo-gen
# Build scripts ran instrumented too: their profiles are not the simulator's.
rm -f "$raw"/*.profraw

say "2/3 training: the simulator on the built-in scenarios"
gen=target/pgo-gen/release/testbed
"$gen" bench sim --duration 300ms --rounds 1 > /dev/null
for s in dumbbell mixed-onoff chain3 fan-in-victim incast repro-fqcn-dumbbell4 \
    repro-fqcn-weighted repro-qcnbs-chain repro-inputcp-fanin repro-er-parking-lot; do
    "$gen" run "$s" --mode sim --set duration=200ms --quiet --no-plots \
        --out "$work/runs/$s" > /dev/null
done
"$profdata" merge -o "$work/merged.profdata" "$raw"

say "3/3 optimised build (target/pgo)"
# One package per build, as trained: a build of the whole workspace unifies the dependencies'
# features across the daemons and the testbed, which changes the compiled functions, and a
# function whose control flow no longer matches its profile gets none (measured: the dumbbell
# as fast as with no profile at all). The daemons share the cores' profile from the training.
for p in $packages; do
    RUSTFLAGS="-Cprofile-use=$work/merged.profdata" \
        cargo build --release -p "$p" --target-dir target/pgo
done
say "built in target/pgo/release: $packages"

if [ "$check" = 1 ]; then
    say "checking: the same outputs as the plain release build"
    cargo build --release --workspace
    for b in release pgo; do
        bin="$PWD/target/$b/testbed"
        [ "$b" = pgo ] && bin="$PWD/target/pgo/release/testbed"
        mkdir -p "$work/check-$b"
        (cd "$work/check-$b" &&
            "$bin" sim "$OLDPWD/testbed/scenarios/sim/dumbbell4.toml" \
                --duration 200ms --json > /dev/null 2>&1 &&
            "$bin" run parking-lot --mode sim --set duration=300ms --quiet --no-plots \
                --out parking-lot > /dev/null 2>&1)
        # The dumbbell summary's wall-clock figures differ from run to run; nothing else may.
        grep -Ev '"(wall_s|virtual_per_wall|frames_per_wall_s)"' \
            "$work/check-$b/dumbbell4.summary.json" > "$work/check-$b/virtual.json"
    done
    for f in virtual.json dumbbell4.trace.jsonl parking-lot/trace.jsonl \
        parking-lot/sim-summary.json parking-lot/flows.csv parking-lot/queues.csv \
        parking-lot/cnms.csv; do
        if ! cmp -s "$work/check-release/$f" "$work/check-pgo/$f"; then
            say "FAILED: $f differs between the plain and the PGO build"
            exit 1
        fi
    done
    say "outputs identical (dumbbell4 200 ms, parking-lot 300 ms); speed, side by side:"
    target/release/testbed bench sim --duration 1s --rounds 3 | sed 's/^/  release: /'
    target/pgo/release/testbed bench sim --duration 1s --rounds 3 | sed 's/^/  pgo:     /'
fi
