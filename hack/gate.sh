#!/usr/bin/env bash
# The CI gate: one runtime's catalog, exiting with cnifault's own status —
# 0 every scenario passed, 1 a scenario failed, 2 the harness could not run.
# (make turns any failing command into its own status 2, so CI calls this,
# not `make e2e`; `make e2e` calls this too, after make built what it needs.)
#
#   [RUNTIME=containerd-2.4] [KNOWN_FAILURES=FILE] [REPORT_DIR=DIR] [REQUIRE_COVERAGE=1|0] [PROCS=N] hack/gate.sh [cnifault flags...]
#
# Runs `make deps build` for RUNTIME (a failure there is status 2), then
# execs _output/bin/cnifault with its runtime and report dir, the flags every
# run gets (hack/run-flags.sh), and then the given ones, which win where they
# repeat one. The gate requires coverage (--require-coverage) unless
# REQUIRE_COVERAGE=0: a pass whose inventories could not read every leak kind
# on this node exits 1, naming the kinds and why.
set -euo pipefail
# Paths given in the environment are the caller's, relative to its dir.
[[ -n ${KNOWN_FAILURES:-} ]] && KNOWN_FAILURES=$(realpath -m -- "$KNOWN_FAILURES")
[[ -n ${REPORT_DIR:-} ]] && REPORT_DIR=$(realpath -m -- "$REPORT_DIR")
cd "$(dirname "$0")/.."
out=$PWD/_output
runtime=${RUNTIME:-containerd-2.4}
# A bin dir given as RUNTIME is named by its path (/opt/vendor/bin -> opt_vendor_bin).
report_dir=${REPORT_DIR:-$out/reports/$(sed 's|^/||; s|/|_|g' <<<"$runtime")}

# Set by make e2e, which has just run deps and build itself.
if [[ ${CNIFAULT_GATE_PREPARED:-} != 1 ]]; then
  if ! make --no-print-directory deps build RUNTIME="$runtime" >&2; then
    echo "hack/gate.sh: make deps build failed" >&2
    exit 2
  fi
fi

# The flags every run of the project's scripts gets (hack/run-flags.sh, which
# hack/matrix.sh shares).
REQUIRE_COVERAGE=${REQUIRE_COVERAGE:-1}
source hack/run-flags.sh "$out"
args=(--runtime "$runtime" --report-dir "$report_dir" "${run_flags[@]}")
# exec: cnifault takes this process's place, so it stays the child of
# whatever started the gate (make, a CI runner) and learns of its death.
exec "$out/bin/cnifault" "${args[@]}" "$@"
