#!/usr/bin/env bash
# Installs everything cnifault needs on a Debian 12 node, as root. Idempotent:
# each step checks before it acts, so re-running costs seconds.
#
# Built artefacts that take minutes are cached outside the clone, keyed by
# version, so a fresh CI clone on the same node reuses them:
#   $CNIFAULT_CACHE/containerd-v2.4.2/bin   containerd 2.4.2 built from its module
#   $CNIFAULT_CACHE/cni-plugins-<ver>/      reference CNI plugins from go.mod's pin
#   $CNIFAULT_CACHE/crio-v1.34.0/bin        crio and pinns (hack/build-crio.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE="${CNIFAULT_CACHE:-${HOME:-/root}/.cache/cnifault}"
OUT="${OUTPUT_DIR:-_output}"
CONTAINERD_VERSION="${CONTAINERD_VERSION:-v2.4.2}"
# conmon and skopeo serve the crio-1.34 managed runtime (CRI-O's per-pod
# monitor, and the import of the pause image into its storage); make and a C
# compiler build its pinns.
APT_PACKAGES=(containerd runc iproute2 iptables util-linux ca-certificates conmon skopeo make gcc libc6-dev)

log() { printf '[deps] %s\n' "$*"; }

if [[ $(id -u) -ne 0 ]]; then
  echo "cnifault needs root: it runs containerd, mounts network namespaces and creates links" >&2
  exit 2
fi

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  log "apt-get install ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # Debian's postinst may start the packaged containerd where systemd runs;
  # cnifault never uses or stops it: every instance has its own socket and dirs.
fi

command -v go >/dev/null || { echo "go is required (Go 1.26 or newer)" >&2; exit 2; }

# Reference CNI plugins, from the plugins module pinned in go.mod.
plugins_version=$(go list -m -f '{{.Version}}' github.com/containernetworking/plugins)
plugins_cache="$CACHE/cni-plugins-$plugins_version"
if [[ ! -x "$plugins_cache/portmap" ]]; then
  log "building CNI plugins $plugins_version (bridge, host-local, loopback, portmap; about a minute)"
  mkdir -p "$plugins_cache.tmp"
  CGO_ENABLED=0 go build -trimpath -o "$plugins_cache.tmp/" \
    github.com/containernetworking/plugins/plugins/main/bridge \
    github.com/containernetworking/plugins/plugins/ipam/host-local \
    github.com/containernetworking/plugins/plugins/main/loopback \
    github.com/containernetworking/plugins/plugins/meta/portmap
  rm -rf "$plugins_cache" && mv "$plugins_cache.tmp" "$plugins_cache"
fi
mkdir -p "$OUT/cni"
ln -sfn "$plugins_cache" "$OUT/cni/bin"

# containerd from its module, for the containerd-2.4 managed runtime.
ctrd_cache="$CACHE/containerd-$CONTAINERD_VERSION/bin"
if [[ ! -x "$ctrd_cache/containerd" || ! -x "$ctrd_cache/containerd-shim-runc-v2" || ! -x "$ctrd_cache/ctr" ]]; then
  log "building containerd $CONTAINERD_VERSION from source (about 4 minutes on 2 cores; cached in $ctrd_cache)"
  rm -rf "$ctrd_cache.tmp" && mkdir -p "$ctrd_cache.tmp"
  # Outside the project module, so containerd's own go.mod decides its deps.
  (cd / && GOBIN="$ctrd_cache.tmp" GOFLAGS=-mod=mod go install \
    "github.com/containerd/containerd/v2/cmd/containerd@$CONTAINERD_VERSION" \
    "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION" \
    "github.com/containerd/containerd/v2/cmd/ctr@$CONTAINERD_VERSION")
  rm -rf "$ctrd_cache" && mv "$ctrd_cache.tmp" "$ctrd_cache"
fi

# CRI-O from its module, for the crio-1.34 managed runtime.
CNIFAULT_CACHE="$CACHE" bash hack/build-crio.sh

log "ready: containerd $(/usr/bin/containerd --version | awk '{print $3}') (Debian), containerd $CONTAINERD_VERSION (cache), CRI-O v1.34.0 (cache), CNI plugins $plugins_version"
