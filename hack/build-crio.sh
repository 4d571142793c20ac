#!/usr/bin/env bash
# Builds CRI-O (crio and pinns) from the github.com/cri-o/cri-o Go module into
# the cache, for the crio-1.34 managed runtime. Called by hack/deps.sh; safe to
# run by hand. Skipped when both binaries are already there.
#
#   $CNIFAULT_CACHE/crio-v1.34.0/bin/{crio,pinns}   the binaries
#   $CNIFAULT_CACHE/crio-v1.34.0/module/            the scratch module built in
#
# crio is built in a scratch module that requires cri-o at the tag, never in
# the project's module: cri-o's own go.mod decides its dependencies, and the
# project's go.mod stays free of them. `go install ...@v1.34.0` cannot be used
# (the module proxy refuses cri-o's version list to it).
#
# The checksum database has no entries for two of cri-o's dependencies at the
# versions v1.34.0 pins (github.com/containerd/nri at a pseudo-version and
# github.com/CloudNativeAI/model-spec); GONOSUMDB exempts exactly those two
# from it. Every other module is verified as usual.
#
# Build tags: containers_image_openpgp (no gpgme), and no btrfs or
# devicemapper graph drivers (no C libraries for them; the harness uses
# overlay). Without the seccomp tag crio runs pods without a seccomp profile,
# which the harness does not need.
#
# pinns is C: its sources ship in the same module, and are copied out of the
# read-only module cache and built with make (a static binary).
set -euo pipefail

CACHE="${CNIFAULT_CACHE:-${HOME:-/root}/.cache/cnifault}"
CRIO_VERSION="${CRIO_VERSION:-v1.34.0}"
CRIO_MODULE=github.com/cri-o/cri-o
CRIO_BUILDTAGS="containers_image_openpgp exclude_graphdriver_btrfs exclude_graphdriver_devicemapper"
CRIO_NOSUMDB="github.com/containerd/nri,github.com/CloudNativeAI/model-spec"

log() { printf '[deps] %s\n' "$*"; }

base="$CACHE/crio-$CRIO_VERSION"
bin="$base/bin"
if [[ -x "$bin/crio" && -x "$bin/pinns" ]]; then
  exit 0
fi

command -v go >/dev/null || { echo "go is required (Go 1.26 or newer)" >&2; exit 2; }
command -v make >/dev/null && command -v cc >/dev/null || { echo "building pinns needs make and a C compiler (apt-get install build-essential)" >&2; exit 2; }

start=$SECONDS
log "building CRI-O $CRIO_VERSION (crio, pinns) from its Go module (about 5 minutes on 2 cores, most of it compiling; cached in $bin)"
tmp="$bin.tmp"
rm -rf "$tmp" && mkdir -p "$tmp" "$base/module"

# The scratch module: nothing but a requirement on cri-o at the tag.
mod="$base/module"
major_minor=$(go env GOVERSION | sed -E 's/^go([0-9]+\.[0-9]+).*/\1/')
cat >"$mod/go.mod" <<EOF
// Scratch module of cnifault's hack/build-crio.sh: builds crio $CRIO_VERSION.
module cnifault.local/crio-build

go $major_minor

require $CRIO_MODULE $CRIO_VERSION
EOF
: >"$mod/go.sum"

build_date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
(
  cd "$mod"
  export GONOSUMDB="$CRIO_NOSUMDB" GOFLAGS=-mod=mod GOWORK=off
  log "  go mod download ($CRIO_MODULE@$CRIO_VERSION and its dependencies)"
  go mod download "$CRIO_MODULE@$CRIO_VERSION"
  log "  go build crio (tags: $CRIO_BUILDTAGS)"
  go build -trimpath -tags "$CRIO_BUILDTAGS" \
    -ldflags "-s -w -X $CRIO_MODULE/internal/version.buildDate=$build_date" \
    -o "$tmp/crio" "$CRIO_MODULE/cmd/crio"
)

log "  make pinns"
src=$(cd "$mod" && GOWORK=off GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' "$CRIO_MODULE")
work=$(mktemp -d "${TMPDIR:-/tmp}/cnifault-pinns.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp -r "$src/pinns" "$work/pinns"
chmod -R u+w "$work"
make -s -C "$work/pinns" >/dev/null
cp "$work/bin/pinns" "$tmp/pinns"

"$tmp/crio" --version >/dev/null
rm -rf "$bin" && mv "$tmp" "$bin"
log "built CRI-O $CRIO_VERSION in $((SECONDS - start))s: $bin"
