#!/usr/bin/env bash
# The e2e workflow's job matrix: one job per managed runtime, with the
# version its build is cached by. Prints GitHub step outputs, which
# .github/workflows/e2e.yml appends to $GITHUB_OUTPUT:
#
#   include=[{"runtime":"containerd-1.7","version":"v1.7.35","cache":"containerd-v1.7.35"},...]
#   cni-plugins=v1.10.0
#
# Every version is read where hack/deps.sh and hack/build-crio.sh take it
# from (hack/containerd-lines.txt, build-crio.sh's CRIO_VERSION, go.mod's
# plugins pin), so the workflow repeats none of them: a line added to the
# table is a job, and a new version is a new cache key, never a stale build.
# `cache` is the runtime's dir under $CNIFAULT_CACHE, empty for a Debian
# package (nothing is built for it). Needs no root; changes nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "hack/e2e-matrix.sh: $*" >&2; exit 2; }

include=()
add() { include+=("{\"runtime\":\"$1\",\"version\":\"$2\",\"cache\":\"$3\"}"); }

n=0
while read -r name version extra; do
  n=$((n + 1))
  [[ -z $name || $name == \#* ]] && continue
  # Checked here as well as by internal/deps's test: the values go into
  # JSON and cache paths unquoted, and a bad row must stop the workflow
  # before any job starts.
  [[ $name =~ ^containerd-([0-9]+\.[0-9]+)$ && -n $version && -z $extra ]] ||
    die "hack/containerd-lines.txt:$n: want containerd-<major>.<minor> <v<major>.<minor>.<patch>|apt>"
  line=${BASH_REMATCH[1]}
  if [[ $version == apt ]]; then
    add "$name" apt ""
  elif [[ $version =~ ^v([0-9]+\.[0-9]+)\.[0-9]+$ && ${BASH_REMATCH[1]} == "$line" ]]; then
    add "$name" "$version" "containerd-$version"
  else
    die "hack/containerd-lines.txt:$n: $name's version $version is not apt or v$line.<patch>"
  fi
done <hack/containerd-lines.txt
((${#include[@]})) || die "hack/containerd-lines.txt lists no containerd line"

# CRI-O's managed runtime is named by its release line, as containerd's are.
# shellcheck disable=SC2016 # the pattern's $ and {} are literal text in build-crio.sh
crio_version=$(sed -n 's/^CRIO_VERSION="\${CRIO_VERSION:-\(v[0-9][0-9.]*\)}"$/\1/p' hack/build-crio.sh)
[[ $crio_version =~ ^v([0-9]+\.[0-9]+)\.[0-9]+$ ]] ||
  die "no CRIO_VERSION=\"\${CRIO_VERSION:-v<major>.<minor>.<patch>}\" line in hack/build-crio.sh"
add "crio-${BASH_REMATCH[1]}" "$crio_version" "crio-$crio_version"

# The same command hack/deps.sh names the plugins' cache dir by.
plugins_version=$(go list -m -f '{{.Version}}' github.com/containernetworking/plugins)
[[ -n $plugins_version ]] || die "go.mod pins no github.com/containernetworking/plugins"

echo "include=[$(IFS=,; echo "${include[*]}")]"
echo "cni-plugins=$plugins_version"
