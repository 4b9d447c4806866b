#!/usr/bin/env bash
# A long coverage-guided fuzzing campaign over every cargo-fuzz target of cnm-proto/fuzz
# (libFuzzer through cargo-fuzz), on a machine whose toolchain can build with the sanitizer
# flags (nightly, or stable with RUSTC_BOOTSTRAP=1, which this script sets).
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#
# Default: 600 s per target, every target. Each target starts from its kept corpus
# (cnm-proto/fuzz/corpus/<target>/) and grows a working corpus in
# cnm-proto/fuzz/work/<target>/ (not committed); crashes land in cnm-proto/fuzz/artifacts/<target>/
# and are replayed with `cargo fuzz run <target> <file>`. At the end one line per target gives
# the executions libFuzzer reported ("#N ... DONE" / "Done N runs"), the final corpus size, and
# whether it crashed. Inputs worth keeping are minimised into the kept corpus with
# `cargo fuzz cmin <target> corpus/<target>` by hand.
#
# The same target bodies run on stable in the ordinary test suite (testbed/tests/fuzz_smoke.rs):
# this script is the long, coverage-guided complement.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../cnm-proto/fuzz"

secs="${1:-600}"
shift || true
if ! command -v cargo-fuzz >/dev/null 2>&1; then
    echo "cargo-fuzz is missing: cargo install cargo-fuzz" >&2
    exit 2
fi
export RUSTC_BOOTSTRAP=1
if [ "$#" -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(cargo fuzz list)
fi

summary=()
status=0
for t in "${targets[@]}"; do
    mkdir -p "work/$t" "artifacts/$t"
    log="work/$t.log"
    echo "== $t: ${secs}s"
    if cargo fuzz run --release "$t" "work/$t" "corpus/$t" -- \
        -max_total_time="$secs" -print_final_stats=1 >"$log" 2>&1; then
        result=ok
    else
        result="CRASH (see $log and artifacts/$t/)"
        status=1
    fi
    execs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' | tail -1 || true)
    if [ -z "$execs" ]; then
        execs=$(grep -Eo 'Done [0-9]+ runs' "$log" | grep -Eo '[0-9]+' | tail -1 || true)
    fi
    files=$(find "work/$t" -type f | wc -l)
    summary+=("$(printf '%-14s %12s executions  %6s corpus files  %s' "$t" "${execs:-?}" "$files" "$result")")
done

echo
echo "== executions per target (${secs}s each)"
printf '%s\n' "${summary[@]}"
exit "$status"
