#!/usr/bin/env bash
# Builds CRI-O (crio and pinns) from the github.com/cri-o/cri-o Go module into
# the cache, for the managed CRI-O lines (hack/crio-lines.txt). Called by
# hack/deps.sh with the tags its runs want; safe to run by hand:
#
#   hack/build-crio.sh TAG...    e.g. hack/build-crio.sh v1.36.3
#
# A tag whose two binaries are already there is skipped.
#
#   $CNIFAULT_CACHE/crio-<tag>-r<recipe>/bin/{crio,pinns}   the binaries
#   $CNIFAULT_CACHE/crio-<tag>-r<recipe>/module/            the scratch module built in
# (<recipe>: hack/lines.sh's BUILD_RECIPE[crio])
#
# crio is built in a scratch module that requires cri-o at the tag, never in
# the project's module: cri-o's own go.mod decides its dependencies, and the
# project's go.mod stays free of them. `go install ...@<tag>` cannot be used
# (the module proxy refuses cri-o's version list to it). Each tag's go.mod
# asks for a Go no newer than the project's (v1.34.0: 1.24.1, v1.35.2:
# 1.25.0, v1.36.3: 1.26.3).
#
# The checksum database has no entries for two of cri-o's dependencies at the
# versions v1.34.0 pins (github.com/containerd/nri at a pseudo-version and
# github.com/CloudNativeAI/model-spec); GONOSUMDB exempts exactly those two
# from it (v1.35.2 and v1.36.3 require neither at those versions). Every
# other module is verified as usual.
#
# A dependency a tag pins at a version the module proxy refuses (403) is
# raised, in the scratch module, to the version the next line's tag pins
# (CRIO_RAISE): v1.35.2 pins github.com/checkpoint-restore/go-criu/v8
# v8.1.0, which the proxy refuses; v1.36.3 pins v8.2.0. go-criu is CRIU's
# client, used only for checkpoint/restore, which the harness's config turns
# off (enable_criu_support = false): no path a verdict depends on.
#
# Version flags, as each tag's Makefile sets them (BASE_LDFLAGS): buildDate,
# and from v1.36 buildCommit, the tag's commit as the module proxy records
# it (v1.34.0 and v1.35.2 read the commit from Go's VCS stamp only, which a
# module build has not). The version itself is a constant in the source.
#
# Build tags: containers_image_openpgp (no gpgme), and no btrfs or
# devicemapper graph drivers (no C libraries for them; the harness uses
# overlay). Without the seccomp tag crio runs pods without a seccomp profile,
# which the harness does not need. The three tags' Makefiles choose their
# tags by the same scripts (hack/*_tag.sh).
#
# pinns is C: its sources ship in the same module, and are copied out of the
# read-only module cache and built with make (a static binary).
set -euo pipefail

CACHE="${CNIFAULT_CACHE:-${HOME:-/root}/.cache/cnifault}"
# shellcheck source=hack/lines.sh
source "$(dirname "$0")/lines.sh"
CRIO_MODULE=github.com/cri-o/cri-o
CRIO_BUILDTAGS="containers_image_openpgp exclude_graphdriver_btrfs exclude_graphdriver_devicemapper"
CRIO_NOSUMDB="github.com/containerd/nri,github.com/CloudNativeAI/model-spec"
# tag -> "module version" requirements added to its scratch module.
declare -A CRIO_RAISE=(
  [v1.35.2]="github.com/checkpoint-restore/go-criu/v8 v8.2.0"
)

log() { printf '[deps] %s\n' "$*"; }
die() { echo "hack/build-crio.sh: $*" >&2; exit 2; }

(($#)) || die "give the tags to build, e.g. v1.36.3 (hack/crio-lines.txt)"
for CRIO_VERSION in "$@"; do
  [[ $CRIO_VERSION =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "$CRIO_VERSION is not a tag v<major>.<minor>.<patch>"
done

# build VERSION builds one tag into the cache.
build() {
  local CRIO_VERSION=$1
  local base
  base="$CACHE/$(cache_dir_name crio "$CRIO_VERSION")"
  local bin="$base/bin"
  if [[ -x "$bin/crio" && -x "$bin/pinns" ]]; then
    return 0
  fi

  command -v go >/dev/null || die "go is required (Go 1.26 or newer)"
  command -v make >/dev/null && command -v cc >/dev/null || die "building pinns needs make and a C compiler (apt-get install build-essential)"

  local start=$SECONDS
  log "building CRI-O $CRIO_VERSION (crio, pinns) from its Go module (about 5 minutes on 2 cores, most of it compiling; cached in $bin)"
  local tmp="$bin.tmp"
  rm -rf "$tmp" && mkdir -p "$tmp" "$base/module"

  # The scratch module: nothing but a requirement on cri-o at the tag.
  local mod="$base/module" major_minor
  major_minor=$(go env GOVERSION | sed -E 's/^go([0-9]+\.[0-9]+).*/\1/')
  cat >"$mod/go.mod" <<EOT
// Scratch module of cnifault's hack/build-crio.sh: builds crio $CRIO_VERSION.
module cnifault.local/crio-build

go $major_minor

require $CRIO_MODULE $CRIO_VERSION
EOT
  if [[ -n ${CRIO_RAISE[$CRIO_VERSION]:-} ]]; then
    log "  raising ${CRIO_RAISE[$CRIO_VERSION]} (the version $CRIO_VERSION pins is refused by the module proxy)"
    echo "require ${CRIO_RAISE[$CRIO_VERSION]}" >>"$mod/go.mod"
  fi
  : >"$mod/go.sum"

  local build_date
  build_date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  (
    cd "$mod"
    export GONOSUMDB="$CRIO_NOSUMDB" GOFLAGS=-mod=mod GOWORK=off
    log "  go mod download ($CRIO_MODULE@$CRIO_VERSION and its dependencies)"
    go mod download "$CRIO_MODULE@$CRIO_VERSION"
    local ldflags="-s -w -X $CRIO_MODULE/internal/version.buildDate=$build_date" src commit
    src=$(go list -m -f '{{.Dir}}' "$CRIO_MODULE")
    commit=$(go list -m -f '{{with .Origin}}{{.Hash}}{{end}}' "$CRIO_MODULE@$CRIO_VERSION")
    if grep -q '^[[:space:]]*buildCommit[[:space:]]' "$src/internal/version/version.go" && [[ -n $commit ]]; then
      ldflags+=" -X $CRIO_MODULE/internal/version.buildCommit=$commit"
    fi
    log "  go build crio (tags: $CRIO_BUILDTAGS; ldflags: $ldflags)"
    go build -trimpath -tags "$CRIO_BUILDTAGS" -ldflags "$ldflags" \
      -o "$tmp/crio" "$CRIO_MODULE/cmd/crio"
  )

  log "  make pinns"
  local src work
  src=$(cd "$mod" && GOWORK=off GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' "$CRIO_MODULE")
  work=$(mktemp -d "${TMPDIR:-/tmp}/cnifault-pinns.XXXXXX")
  # shellcheck disable=SC2064 # the dir is this build's, fixed now
  trap "rm -rf '$work'" EXIT
  cp -r "$src/pinns" "$work/pinns"
  chmod -R u+w "$work"
  make -s -C "$work/pinns" >/dev/null
  cp "$work/bin/pinns" "$tmp/pinns"
  rm -rf "$work"
  trap - EXIT

  "$tmp/crio" --version >/dev/null
  rm -rf "$bin" && mv "$tmp" "$bin"
  log "built CRI-O $CRIO_VERSION in $((SECONDS - start))s: $bin"
}

for v in "$@"; do
  build "$v"
done
