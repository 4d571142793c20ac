#!/usr/bin/env bash
# make matrix: the catalog on several runtimes side by side, into one
# scenario × runtime matrix (cnifault matrix).
#
#   [RUNTIMES="containerd-1.6 crio-1.34 /opt/vendor/bin"] [JOBS=N] [KNOWN_FAILURES=FILE]
#   [MATRIX_DIR=DIR] [REQUIRE_COVERAGE=1] [PROCS=N] hack/matrix.sh [cnifault run flags...]
#
# RUNTIMES empty or unset is every managed runtime (cnifault's default);
# JOBS empty is the machine's core count; PROCS empty, each catalog in
# cnifault's default processes (--procs). Each run gets the flags the gate
# gives it (hack/run-flags.sh), then the given ones. Reports go to
# MATRIX_DIR/<runtime>/ (default _output/matrix), each run's output to its
# run.log there, and the matrix to MATRIX_DIR/matrix.md, .html and .json.
#
# Runs `make deps build` for RUNTIMES first (a failure there is status 2),
# then execs cnifault matrix, so that its status is this script's: 0 every
# run passed, 1 a run failed, 2 a run could not run or the input was bad.
set -euo pipefail
# Paths given in the environment are the caller's, relative to its dir.
[[ -n ${KNOWN_FAILURES:-} ]] && KNOWN_FAILURES=$(realpath -m -- "$KNOWN_FAILURES")
[[ -n ${MATRIX_DIR:-} ]] && MATRIX_DIR=$(realpath -m -- "$MATRIX_DIR")
read -ra given <<<"${RUNTIMES:-}"
runtimes=()
for rt in "${given[@]}"; do
  # A bin dir is the caller's path too; a name has no slash.
  [[ $rt == */* ]] && rt=$(realpath -m -- "$rt")
  runtimes+=("$rt")
done
cd "$(dirname "$0")/.."
out=$PWD/_output

# Set by make matrix, which has just run deps and build itself.
if [[ ${CNIFAULT_GATE_PREPARED:-} != 1 ]]; then
  if ! make --no-print-directory deps build RUNTIME="${runtimes[*]}" >&2; then
    echo "hack/matrix.sh: make deps build failed" >&2
    exit 2
  fi
fi

source hack/run-flags.sh "$out"
matrix=(--out "${MATRIX_DIR:-$out/matrix}")
((${#runtimes[@]} == 0)) || matrix+=(--runtimes "$(IFS=,; echo "${runtimes[*]}")")
[[ -z ${JOBS:-} ]] || matrix+=(--jobs "$JOBS")
# exec: cnifault takes this process's place, so it stays the child of
# whatever started the matrix (make, a CI runner) and learns of its death;
# it hands an interrupt on to its runs and waits for their teardown.
exec "$out/bin/cnifault" matrix "${matrix[@]}" -- "${run_flags[@]}" "$@"
