# shellcheck shell=bash
# The flags every catalog run started by this project's scripts gives
# cnifault, whichever runtime it brings up: the binaries and plugins `make
# build` and `make deps` put under _output, the shared work dir, Ginkgo's CI
# settings, KNOWN_FAILURES when set (an absolute path by then), --procs
# where PROCS is set, and --require-coverage where REQUIRE_COVERAGE=1
# (hack/gate.sh's default).
# Sourced by hack/gate.sh (one runtime, CI's gate) and hack/matrix.sh
# (several at once), so that a matrix column is the run the gate makes.
#
#   source hack/run-flags.sh OUT     sets the array run_flags; OUT is _output's absolute path
run_flags=(
  --work-dir "$1/work"
  --cni-plugin-dir "$1/cni/bin" --pause-binary "$1/bin/cnifault-pause"
  --fault-plugin "$1/bin/cni-fault" --runc-wrapper "$1/bin/cnifault-runc-wrapper"
  --nri-plugin "$1/bin/cnifault-nri"
  # Ginkgo's CI settings: random order, fail on pending or empty, a suite timeout.
  -ginkgo.randomize-all -ginkgo.fail-on-pending -ginkgo.fail-on-empty -ginkgo.timeout=20m
)
[[ -z ${KNOWN_FAILURES:-} ]] || run_flags+=(--known-failures "$KNOWN_FAILURES")
# PROCS: the catalog in that many processes (cnifault --procs); unset or
# empty, cnifault's default.
[[ -z ${PROCS:-} ]] || run_flags+=(--procs "$PROCS")
# A pass whose inventories did not read every leak kind (a netfilter tool
# missing, say) exits 1 naming the kinds, instead of passing on less.
[[ ${REQUIRE_COVERAGE:-0} == 0 ]] || run_flags+=(--require-coverage)
