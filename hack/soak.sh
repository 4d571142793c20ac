#!/usr/bin/env bash
# Runs the whole catalog N times on each managed runtime and reports every
# scenario whose signature (verdict, leaked kinds with their counts,
# reclaim) changed between runs (make soak), and how often each side of
# every race the expectations file pins ran.
#
#   [N=3] [RUNTIMES="containerd-1.6 containerd-2.4 crio-1.34"] [KNOWN_FAILURES=hack/known-failures.yaml] hack/soak.sh
#
# Each run is gated by KNOWN_FAILURES (the project's expectations unless
# set, "" for none), so that its report says which side of a pinned race it
# saw (report.json's race); a scenario that ran one side or the other in
# every run is not unstable, and the summary counts each side per runtime.
#
# Runs take turns runtime by runtime within each round, so a slow period of
# the machine falls on every runtime alike. Each run's report stays in
# _output/soak/<runtime>/run-<i>/; the comparison (cmd/cnifault-soak) goes to
# stdout and _output/soak/stability.txt. Exit status: 0 every scenario had one
# outcome per runtime, 1 some scenario's changed, 2 a run left no report or
# the soak could not start.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${N:-3}
read -ra runtimes <<<"${RUNTIMES:-containerd-1.6 containerd-2.4 crio-1.34}"
[[ $n =~ ^[1-9][0-9]*$ ]] || { echo "hack/soak.sh: N must be a positive number, got '$n'" >&2; exit 2; }
((${#runtimes[@]})) || { echo "hack/soak.sh: RUNTIMES is empty" >&2; exit 2; }
out=$PWD/_output/soak
export KNOWN_FAILURES=${KNOWN_FAILURES-$PWD/hack/known-failures.yaml}

make --no-print-directory deps build RUNTIME="${runtimes[*]}" >&2 || { echo "hack/soak.sh: make deps build failed" >&2; exit 2; }
go build -o _output/bin/cnifault-soak ./cmd/cnifault-soak || exit 2
rm -rf "$out"

reports=()
for ((i = 1; i <= n; i++)); do
  for rt in "${runtimes[@]}"; do
    dir=$out/$rt/run-$i
    mkdir -p "$out/$rt"
    echo "== soak run $i/$n: $rt" >&2
    set +e
    CNIFAULT_GATE_PREPARED=1 RUNTIME=$rt REPORT_DIR=$dir bash hack/gate.sh --work-dir "$out/work" >"$dir.log" 2>&1
    status=$?
    set -e
    echo "   exit status $status (log $dir.log)" >&2
    if [[ ! -f $dir/report.json ]]; then
      echo "hack/soak.sh: run $i on $rt wrote no report; see $dir.log" >&2
      exit 2
    fi
    reports+=("$dir/report.json")
  done
done

set +e
_output/bin/cnifault-soak "${reports[@]}" | tee "$out/stability.txt"
status=${PIPESTATUS[0]}
exit "$status"
