#!/usr/bin/env bash
# Runs every (scenario, variant) pair of docs/REPRODUCTION.md's results table in network
# namespaces (testbed run ... --mode netns, at the S of each scenario's [scenario] table), one
# run at a time, then prints one line per run with the claim's metric read from summary.json.
#
#   sudo scripts/reproduce-netns.sh                 # every run (26 runs, about 15 minutes)
#   sudo scripts/reproduce-netns.sh 2a 4            # only the runs of these claims
#   OUT=results/x scripts/reproduce-netns.sh        # another results root
#   SUMMARY_ONLY=1 scripts/reproduce-netns.sh       # re-print the table of earlier runs
#   SEEDS="1 2 3" scripts/reproduce-netns.sh 1b     # several seeds: <name>-<variant>-s<seed>/
#   NICE=-15 scripts/reproduce-netns.sh 5           # the runs at a higher CPU priority (a
#                                                   # machine shared with other work)
#
# Each run writes results/repro-netns/<name>-<variant>/ (summary.json, flows.csv, report.md,
# plots) and loadavg.txt (/proc/loadavg just before the run: the machine may be shared; a run
# whose fidelity check failed says so in the `faithful` column and its warnings).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

OUT=${OUT:-results/repro-netns${NICE:+-nice}}
TESTBED=${TESTBED:-target/release/testbed}

if [[ -z "${SUMMARY_ONLY:-}" ]]; then
    if [[ $EUID -ne 0 ]]; then
        echo "reproduce-netns: network namespaces need root" >&2
        exit 1
    fi
    if [[ ! -x $TESTBED || -n "${BUILD:-}" ]]; then
        cargo build --release --quiet -p testbed -p cp-switch -p rp-agent
    fi
fi

# claim | scenario | variant (results label) | --variant | more options
RUNS=(
    "1a|repro-qcnbs-chain|qcn|qcn|"
    "1b|repro-qcnbs-chain|adaptive-bc+qcn-bs|adaptive-bc+qcn-bs|"
    "1c|repro-qcnbs-chain|qcn-bs|qcn-bs|"
    "2a|repro-fqcn-dumbbell4|fqcn|fqcn|"
    # The file's CP mode is fqcn: `--variant qcn` would leave it so.
    "2a,5|repro-fqcn-dumbbell4|qcn||--cp-mode qcn"
    "2b|repro-fqcn-weighted|fqcn|fqcn|"
    # The two-station file: no `--variant input` (its edge switch e0 has no CP and must keep
    # none); `--culprit` acts on the CPs there are (sw0's).
    "3a|repro-inputcp-victim-2src|occupancy-deterministic||--culprit occupancy-deterministic"
    "3a|repro-inputcp-victim-2src|occupancy-random||--culprit occupancy-random"
    "3a|repro-inputcp-victim-2src|arrival||--culprit arrival"
    "3b|repro-inputcp-victim|occupancy-deterministic|input|--culprit occupancy-deterministic"
    "3b|repro-inputcp-victim|occupancy-random|input|--culprit occupancy-random"
    "3b|repro-inputcp-victim|arrival|input|--culprit arrival"
    "4|repro-er-parking-lot|explicit-rate|explicit-rate|"
    "10|repro-inputcp-fanin|input|input|"
    "10|repro-inputcp-fanin|output|output|"
    "11|repro-er-asymmetric|explicit-rate|explicit-rate|"
    "6|repro-fqcn-step|fqcn|fqcn|"
    "6|repro-fqcn-step|qcn||--cp-mode qcn"
    "7|repro-fqcn-mixed-onoff|fqcn|fqcn|"
    "7|repro-fqcn-mixed-onoff|qcn||--cp-mode qcn"
    "8|repro-fqcn-weighted-cap|fqcn|fqcn|"
    "9|repro-fqcn-incast|fqcn|fqcn|"
    "9|repro-fqcn-incast|qcn||--cp-mode qcn"
    "9|repro-fqcn-incast|off|off|"
    "12|repro-fqcn-parking-lot|fqcn|fqcn|"
    "12|repro-fqcn-parking-lot|qcn||--cp-mode qcn"
)

wanted() {
    local claims=$1
    [[ ${#ONLY[@]} -eq 0 ]] && return 0
    local c w
    for c in ${claims//,/ }; do
        for w in "${ONLY[@]}"; do
            [[ $c == "$w" ]] && return 0
        done
    done
    return 1
}
ONLY=("$@")

# The seeds to run: the file's (no --seed, no suffix) unless SEEDS is given.
read -r -a SEED_LIST <<<"${SEEDS:-file}"
dir_of() {
    if [[ $2 == file ]]; then echo "$OUT/$1"; else echo "$OUT/$1-s$2"; fi
}

# Runs one (scenario, variant, seed) into its directory.
run_one() {
    local claims=$1 sc=$2 label=$3 variant=$4 more=$5 seed=$6 dir
    dir=$(dir_of "$sc-$label" "$seed")
    rm -rf "$dir"
    mkdir -p "$dir"
    cat /proc/loadavg >"$dir/loadavg.txt"
    local args=(run "$sc" --mode netns --out "$dir" --quiet)
    local nice=()
    [[ -n ${NICE:-} ]] && nice=(nice -n "$NICE")
    [[ -n $variant ]] && args+=(--variant "$variant")
    # shellcheck disable=SC2206 # the options are words without spaces or globs
    [[ -n $more ]] && args+=($more)
    [[ $seed != file ]] && args+=(--seed "$seed")
    echo "== claim $claims: $sc ($label, seed $seed), load $(cut -d' ' -f1-3 "$dir/loadavg.txt")" >&2
    if ! "${nice[@]}" "$TESTBED" "${args[@]}" >"$dir/run.log" 2>&1; then
        echo "   failed: $(tail -n 3 "$dir/run.log")" >&2
    fi
}

mkdir -p "$OUT"
if [[ -z "${SUMMARY_ONLY:-}" ]]; then
    for r in "${RUNS[@]}"; do
        IFS='|' read -r claims sc label variant more <<<"$r"
        wanted "$claims" || continue
        for seed in "${SEED_LIST[@]}"; do
            run_one "$claims" "$sc" "$label" "$variant" "$more" "$seed"
        done
    done
fi

# One line per run: claim, run, load before it, faithful, the claim's metric. The dumbbell's
# Qeq is 33 KB (fqcn_dumbbell4.toml).
report_one() {
    local claims=$1 sc=$2 label=$3 seed=$4 dir label_s load metric faithful warns
    dir=$(dir_of "$sc-$label" "$seed")
    label_s=$label
    [[ $seed != file ]] && label_s="$label s$seed"
    load=$(cut -d' ' -f1 "$dir/loadavg.txt" 2>/dev/null || echo "?")
    if [[ ! -f $dir/summary.json ]]; then
        printf '%-5s %-28s %-24s load %-5s  no summary.json (see %s/run.log)\n' \
            "$claims" "$sc" "$label_s" "$load" "$dir"
        return
    fi
    metric=$(jq -r --arg sc "$sc" '
        def mbps: if . == null then "-" else (. / 1e6 * 100 | round / 100 | tostring) end;
        def r2: if . == null then "-" else (. * 1000 | round / 1000 | tostring) end;
        def flows: [.flows[] | "\(.name) \(.mean_bps | mbps)"] | join(", ");
        def ratios: [.flows[] | "\(.name) \(.share_ratio | r2)"] | join(", ");
        def bn: .bottlenecks[0] // {};
        def qeq: 33000;
        if $sc == "repro-qcnbs-chain" then
            "f1/share \(.flows[] | select(.name == "f1") | .share_ratio | r2); rates Mb/s: \(flows)"
        elif $sc == "repro-fqcn-dumbbell4" then
            "jain \(.jain_rates | r2); min/max \(([.flows[].mean_bps] | min) / ([.flows[].mean_bps] | max) | r2); queue mean \((bn.queue_mean_bytes // 0) / 1000 | r2) KB = \((bn.queue_mean_bytes // 0) / qeq | r2) Qeq; util \(bn.utilization | r2); drops \(bn.drops); rates Mb/s: \(flows)"
        elif $sc == "repro-fqcn-weighted" then
            ([.flows[].mean_bps] | add) as $sum
            | "share of carried (weights 0.4/0.3/0.2/0.1): \([.flows[] | (.mean_bps / $sum) | r2] | join(", ")); rate/unweighted share: \(ratios)"
        elif ($sc | startswith("repro-inputcp-victim")) then
            "f6 \(.flows[] | select(.name == "f6") | .mean_bps | mbps) Mb/s (68.9 offered); rates Mb/s: \(flows)"
        elif $sc == "repro-inputcp-fanin" then
            "jain (5-flow window) \(.jain_rates | r2); max/min \(([.flows[].mean_bps] | max) / ([.flows[].mean_bps] | min) | r2); rates Mb/s: \(flows)"
        elif $sc == "repro-fqcn-step" then
            "jain (after the step back up) \(.jain_rates | r2); queue mean \((bn.queue_mean_bytes // 0) / 1000 | r2) KB; util \(bn.utilization | r2); convergence \(.convergence_s); rates Mb/s: \(flows)"
        elif ($sc | IN("repro-fqcn-mixed-onoff", "repro-fqcn-weighted-cap", "repro-fqcn-parking-lot")) then
            "rate/share: \(ratios); rates Mb/s: \(flows)"
        elif $sc == "repro-fqcn-incast" then
            "goodput Mb/s: \(flows); util \(bn.utilization | r2); drops \(bn.drops)"
        elif ($sc | startswith("repro-er-")) then
            "rate/share: \(ratios); queue mean \((bn.queue_mean_bytes // 0) / 1000 | r2) KB"
        else flows end' "$dir/summary.json")
    faithful=$(jq -r '.faithful' "$dir/summary.json")
    warns=$(jq -r '[.warnings[] | select(startswith("netns run at time scale") | not)] | length' \
        "$dir/summary.json")
    printf '%-5s %-28s %-24s load %-5s faithful %-5s warnings %s | %s\n' \
        "$claims" "$sc" "$label_s" "$load" "$faithful" "$warns" "$metric"
}

for r in "${RUNS[@]}"; do
    IFS='|' read -r claims sc label _ _ <<<"$r"
    wanted "$claims" || continue
    for seed in "${SEED_LIST[@]}"; do
        report_one "$claims" "$sc" "$label" "$seed"
    done
done
