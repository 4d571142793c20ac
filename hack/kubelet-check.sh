#!/usr/bin/env bash
# Kubelet mode on each runtime given (make kubelet-check): the scenarios
# whose verdict depends on kubelet (label kubelet-mode), each run plain and
# then under the pinned real kubelet, judged by whether kubelet's outcome
# agrees with the plain run's model. One runtime after the other; each
# report in _output/kubelet-check/<runtime>/ (a bin dir is named by its
# path). The plain verdicts are gated by hack/known-failures.yaml, as CI's
# gate does, so a run exits 1 only where a pin changed or kubelet
# disagreed with the model.
#
#   hack/kubelet-check.sh RUNTIME...   (a managed runtime, or a bin dir
#                                       holding a containerd or CRI-O build)
#
# Exit status: the worst of the runs' (0 all agree, 1 a disagreement or a
# changed pin, 2 a run could not run).
set -euo pipefail
cd "$(dirname "$0")/.."
(($#)) || { echo "usage: hack/kubelet-check.sh RUNTIME..." >&2; exit 2; }
out=$PWD/_output
worst=0
for runtime in "$@"; do
  name=$(sed 's|^/||; s|/|_|g' <<<"$runtime")
  echo "== kubelet-check: $runtime (report: $out/kubelet-check/$name)"
  if ! make --no-print-directory deps build KUBELET=1 RUNTIME="$runtime" >&2; then
    echo "hack/kubelet-check.sh: make deps build failed for $runtime" >&2
    worst=2
    continue
  fi
  rc=0
  CNIFAULT_GATE_PREPARED=1 RUNTIME="$runtime" REPORT_DIR="$out/kubelet-check/$name" \
    KNOWN_FAILURES=hack/known-failures.yaml bash hack/gate.sh --kubelet || rc=$?
  echo "== kubelet-check: $runtime: exit $rc"
  ((rc > worst)) && worst=$rc
done
exit "$worst"
