#!/usr/bin/env bash
# The e2e workflow's job matrix: one job per managed runtime, with the
# version its build is cached by. Prints GitHub step outputs, which
# .github/workflows/e2e.yml appends to $GITHUB_OUTPUT:
#
#   include=[{"runtime":"containerd-1.7","version":"v1.7.36","cache":"containerd-v1.7.36-r2"},...]
#   cni-plugins=v1.10.0
#   runc=v1.5.3
#
# Every version is read where hack/deps.sh takes it from (the runtime
# tables hack/containerd-lines.txt and hack/crio-lines.txt, through the one
# reader hack/lines.sh, go.mod's plugins pin, and hack/programs.txt's runc
# pin), so the workflow repeats none of them: a line added to a table is a
# job, and a new version is a new cache key, never a stale build. `cache` is
# the runtime's build dir under $CNIFAULT_CACHE; every job also builds the
# pinned runc, cached in runc-<version>.
# Needs no root; changes nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "hack/e2e-matrix.sh: $*" >&2; exit 2; }

# shellcheck source=hack/lines.sh
source hack/lines.sh
# Checked here as well as by the Go tests: a bad row must stop the workflow
# before any job starts.
rows=$(managed_lines) || exit 2

include=()
while read -r name version cache; do
  include+=("{\"runtime\":\"$name\",\"version\":\"$version\",\"cache\":\"$cache\"}")
done <<<"$rows"

# The same command hack/deps.sh names the plugins' cache dir by.
plugins_version=$(go list -m -f '{{.Version}}' github.com/containernetworking/plugins)
[[ -n $plugins_version ]] || die "go.mod pins no github.com/containernetworking/plugins"

# The same row hack/deps.sh builds runc from.
runc_version=$(awk '$1 == "runc" && $2 ~ /^build:runc@/ { sub(/^build:runc@/, "", $2); print $2 }' hack/programs.txt)
[[ $runc_version =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "hack/programs.txt has no runc row build:runc@v<major>.<minor>.<patch>"

echo "include=[$(IFS=,; echo "${include[*]}")]"
echo "cni-plugins=$plugins_version"
echo "runc=$runc_version"
