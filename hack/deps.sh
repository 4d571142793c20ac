#!/usr/bin/env bash
# Installs what cnifault needs on a Debian or Ubuntu node (apt), as root. Idempotent:
# each step checks before it acts, so re-running costs seconds.
#
#   hack/deps.sh                  everything: every managed runtime and the tests (make test)
#   hack/deps.sh RUNTIME...       what those runtimes need (make e2e RUNTIME=...): a managed
#                                 line (hack/containerd-lines.txt, hack/crio-lines.txt),
#                                 a bin dir holding a containerd or a CRI-O build (crio and
#                                 pinns), or a family (containerd, crio: what any of its
#                                 runtimes needs, nothing built)
#   hack/deps.sh --kubelet [RUNTIME...]
#                                 the same, and the pinned kubelet (kubelet mode; make deps
#                                 KUBELET=1): for runtimes named, no kubelet is built without
#                                 --kubelet; with none named (make test) it is
#   hack/deps.sh --list [--kubelet] [RUNTIME...]   print the Debian packages and builds chosen, change nothing
#   hack/deps.sh --versions [RUNTIME...]
#                                 print the version found of each Debian package chosen, and
#                                 exit 2 with one line if one is missing or older than its min;
#                                 install nothing
#
# What is installed comes from hack/programs.txt, the one list of every
# program cnifault, its tests, its runtimes and their plugins execute, with
# the oldest version of each distribution package (min). Every managed
# runtime and the one runc they all run are built from their Go modules at
# pinned tags; no runtime comes from the distribution.
#
# Built artefacts that take minutes are cached outside the clone, keyed by
# version, so a fresh CI clone on the same node reuses them:
#   $CNIFAULT_CACHE/containerd-<tag>-r<recipe>/bin
#                                           each managed containerd line built from its
#                                           module (cmd/cnifault-build, inside a copy of the
#                                           module's own source tree)
#   $CNIFAULT_CACHE/runc-<tag>/runc         the pinned runc (programs.txt's build:runc@<tag>)
#   $CNIFAULT_CACHE/kubelet-<tag>-r<recipe>/kubelet
#                                           the pinned kubelet, with --kubelet (programs.txt's
#                                           build:kubelet@<tag>; cmd/cnifault-build, fixtures/kubelet)
#   $CNIFAULT_CACHE/cni-plugins-<ver>/      reference CNI plugins from go.mod's pin
#   $CNIFAULT_CACHE/crio-<tag>-r<recipe>/bin
#                                           each managed CRI-O line's crio and pinns
#                                           (hack/build-crio.sh)
# (<recipe>: hack/lines.sh's BUILD_RECIPE, raised when a family's build changes)
#
# Two runs at once (two `make e2e` in one checkout, or two clones sharing the
# cache) take turns: everything below the root check holds an exclusive lock
# on $CNIFAULT_CACHE/deps.lock.
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE="${CNIFAULT_CACHE:-${HOME:-/root}/.cache/cnifault}"
OUT="${OUTPUT_DIR:-_output}"
log() { printf '[deps] %s\n' "$*"; }
die() { echo "hack/deps.sh: $*" >&2; exit 2; }

# The managed lines of every family: name and tag, from the tables' one
# reader.
# shellcheck source=hack/lines.sh
source hack/lines.sh
rows=$(managed_lines) || exit 2
declare -A LINE_TAG=()
LINES=()
while read -r name tag _; do
  LINE_TAG[$name]=$tag
  LINES+=("$name")
done <<<"$rows"

list=0 versions_only=0 kubelet=0
while (($#)); do
  case $1 in
    --list) list=1 ;;
    --versions) versions_only=1 ;;
    --kubelet) kubelet=1 ;;
    *) break ;;
  esac
  shift
done
# A runtime given as a bin dir is the build it holds: it needs what every
# runtime of its family needs, and nothing is built for it. A dir holding
# neither build is refused here, before anything is installed.
wanted=()
for r in "$@"; do
  case "$r" in
    /*|./*|../*)
      if [[ -x $r/crio && -x $r/pinns ]]; then
        wanted+=(crio)
      elif [[ -x $r/containerd ]]; then
        wanted+=(containerd)
      else
        die "$r holds neither a containerd build (containerd) nor a CRI-O build (crio and pinns)"
      fi ;;
    containerd|crio) wanted+=("$r") ;;
    *)
      [[ -n ${LINE_TAG[$r]:-} ]] && { wanted+=("$r"); continue; }
      die "unknown runtime $r (one of ${LINES[*]}, a family: containerd, crio, or a bin dir)" ;;
  esac
done

# chosen prints the sources (apt:<pkg>, build:<what>[@<tag>], project, go)
# that the wanted runtimes need, one a line, each once, an apt: source with
# its min ("apt:<pkg> <min>", - for any); with none wanted, every source but
# the node's own (needed: node). A row needed by kubelet is chosen with
# --kubelet, and one needed by kubelet alone only then.
chosen() {
  local n=0 program source needed runby min extra tag w ok
  local -A seen=()
  while read -r program source needed runby min extra; do
    n=$((n + 1))
    [[ -z $program || $program == \#* ]] && continue
    [[ -n $min && -z $extra ]] || die "hack/programs.txt:$n: want 5 columns (program source needed run-by min)"
    # The node's own: external mode uses it where the node has it.
    [[ $needed == node ]] && continue
    ok=$(( ${#wanted[@]} == 0 ))
    [[ $needed == kubelet ]] && ok=0
    for tag in ${needed//,/ }; do
      [[ $tag == kubelet ]] && ((kubelet)) && ok=1
      for w in "${wanted[@]}"; do
        [[ $tag == all || $tag == "$w" || $w == "$tag"-* ]] && ok=1
      done
    done
    if ((ok)) && [[ -z ${seen[$source]:-} ]]; then
      seen[$source]=1
      if [[ $source == apt:* ]]; then echo "$source $min"; else echo "$source"; fi
    fi
  done <hack/programs.txt
}
sources=$(chosen)
apt_packages=($(sed -n 's/^apt:\([^ ]*\).*/\1/p' <<<"$sources"))
declare -A APT_MIN=()
while read -r pkg min; do
  [[ -n $pkg ]] && APT_MIN[$pkg]=$min
done < <(sed -n 's/^apt://p' <<<"$sources")
needs_build() { grep -q "^build:$1\(@.*\)\?$" <<<"$sources"; }
# The pinned runc's tag (build:runc@<tag>), where the runs need it.
runc_tag=$(sed -n 's/^build:runc@//p' <<<"$sources")
if needs_build runc && [[ ! $runc_tag =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
  die "hack/programs.txt: runc's source must be build:runc@v<major>.<minor>.<patch>"
fi
# The pinned kubelet's tag (build:kubelet@<tag>), with --kubelet.
kubelet_tag=$(sed -n 's/^build:kubelet@//p' <<<"$sources")
if needs_build kubelet && [[ ! $kubelet_tag =~ ^v1\.[0-9]+\.[0-9]+$ ]]; then
  die "hack/programs.txt: kubelet's source must be build:kubelet@v1.<minor>.<patch>"
fi

# check_versions prints the version found of each Debian package chosen,
# one a line, and stops with one line at a package that is missing or
# older than its min: a verdict on an older tool than the pins were
# verified with (or than a documented requirement) is not trusted.
check_versions() {
  local pkg found min
  command -v dpkg-query >/dev/null || die "dpkg-query not found: cnifault's deps are Debian packages (apt)"
  for pkg in "${apt_packages[@]}"; do
    found=$(dpkg-query -W -f='${Status} ${Version}' "$pkg" 2>/dev/null | sed -n 's/^install ok installed //p')
    min=${APT_MIN[$pkg]:--}
    [[ -n $found ]] || die "$pkg is not installed (run make deps)"
    if [[ $min != - ]] && ! dpkg --compare-versions "$found" ge "$min"; then
      die "$pkg $found is older than $min, the oldest cnifault accepts (hack/programs.txt)"
    fi
    log "found $pkg $found$([[ $min != - ]] && echo " (>= $min)")"
  done
}

# The tags of a family to build: those of its wanted lines, or of every
# line when no runtime is named.
tags_of() {
  local family=$1 line tag
  needs_build "$family" || return 0
  for line in "${LINES[@]}"; do
    [[ $line == "$family"-* ]] || continue
    tag=${LINE_TAG[$line]}
    if ((${#wanted[@]} == 0)) || [[ " ${wanted[*]} " == *" $line "* ]]; then
      echo "$tag"
    fi
  done
}
mapfile -t containerd_tags < <(tags_of containerd)
mapfile -t crio_tags < <(tags_of crio)

if ((list)); then
  echo "apt: ${apt_packages[*]}"
  builds=$(sed -n 's/^build://p' <<<"$sources" | grep -vx 'containerd\|crio' | tr '\n' ' ')
  for tag in "${containerd_tags[@]}"; do builds+="containerd@$tag "; done
  for tag in "${crio_tags[@]}"; do builds+="crio@$tag "; done
  echo "build: ${builds% }"
  exit 0
fi

if ((versions_only)); then
  check_versions
  exit 0
fi

[[ $(id -u) -eq 0 ]] || die "cnifault needs root: it runs containerd, mounts network namespaces and creates links"

mkdir -p "$CACHE"
exec 9>"$CACHE/deps.lock"
if ! flock -n 9; then
  log "waiting for another hack/deps.sh to finish (lock $CACHE/deps.lock)"
  flock 9
fi

missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  log "apt-get install ${missing[*]}"
  apt-get update -qq
  # apt's own lock may be held by another installer on the node: wait for it.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    -o DPkg::Lock::Timeout=300 "${missing[@]}" >/dev/null
fi
check_versions

command -v go >/dev/null || die "go is required (Go 1.26 or newer)"

built=()
# The pinned runc, from its module: cgo (runc's nsenter is C) with the
# seccomp tag, as runc's own Makefile builds it but for libpathrs (an
# optional Rust library no distribution we run packages; without it runc
# uses its own Go code). `go install <module>@<tag>` is enough: runc's
# go.mod has no replace or exclude directives.
if needs_build runc; then
  runc_dir="$CACHE/runc-$runc_tag"
  if [[ ! -x $runc_dir/runc ]]; then
    log "building runc $runc_tag from its Go module (cgo, seccomp; about a minute)"
    rm -rf "$runc_dir.tmp" && mkdir -p "$runc_dir.tmp"
    if ! (cd / && env -u GOFLAGS GOWORK=off CGO_ENABLED=1 GOBIN="$runc_dir.tmp" \
      go install -trimpath -buildmode=pie -tags "seccomp urfave_cli_no_docs" \
      -ldflags "-X main.version=${runc_tag#v}" "github.com/opencontainers/runc@$runc_tag"); then
      die "building runc $runc_tag failed (it needs gcc, libc6-dev, libseccomp-dev and pkg-config)"
    fi
    rm -rf "$runc_dir" && mv "$runc_dir.tmp" "$runc_dir"
  fi
  runc_says=$("$runc_dir/runc" --version) || die "$runc_dir/runc does not run"
  [[ $runc_says == "runc version ${runc_tag#v}"* ]] || die "$runc_dir/runc says \"${runc_says%%$'\n'*}\", not runc version ${runc_tag#v}"
  built+=("runc $runc_tag ($(sed -n 's/^libseccomp: /libseccomp /p' <<<"$runc_says"))")
fi

# Reference CNI plugins, from the plugins module pinned in go.mod.
if needs_build cni-plugins; then
  plugins_version=$(go list -m -f '{{.Version}}' github.com/containernetworking/plugins)
  plugins_cache="$CACHE/cni-plugins-$plugins_version"
  if [[ ! -x "$plugins_cache/portmap" ]]; then
    log "building CNI plugins $plugins_version (bridge, host-local, loopback, portmap; about a minute)"
    rm -rf "$plugins_cache.tmp" && mkdir -p "$plugins_cache.tmp"
    CGO_ENABLED=0 go build -trimpath -o "$plugins_cache.tmp/" \
      github.com/containernetworking/plugins/plugins/main/bridge \
      github.com/containernetworking/plugins/plugins/ipam/host-local \
      github.com/containernetworking/plugins/plugins/main/loopback \
      github.com/containernetworking/plugins/plugins/meta/portmap
    rm -rf "$plugins_cache" && mv "$plugins_cache.tmp" "$plugins_cache"
  fi
  mkdir -p "$OUT/cni"
  ln -sfn "$plugins_cache" "$OUT/cni/bin"
  built+=("CNI plugins $plugins_version")
fi

# containerd from its module, for each managed line wanted. The builder is
# Go (fixtures/containerd Build), shared with `cnifault bisect`, so that one
# cache serves both.
if ((${#containerd_tags[@]})); then
  missing_tags=()
  for tag in "${containerd_tags[@]}"; do
    dir="$CACHE/$(cache_dir_name containerd "$tag")/bin"
    [[ -x $dir/containerd && -x $dir/containerd-shim-runc-v2 && -x $dir/ctr ]] || missing_tags+=("$tag")
  done
  if ((${#missing_tags[@]})); then
    log "building containerd ${missing_tags[*]} from source (about 4 minutes each on 2 cores)"
    if ! CNIFAULT_CACHE="$CACHE" go run ./cmd/cnifault-build "${missing_tags[@]}" >/dev/null; then
      die "building containerd ${missing_tags[*]} failed"
    fi
  fi
  for tag in "${containerd_tags[@]}"; do built+=("containerd $tag"); done
fi

# The pinned kubelet from k8s.io/kubernetes (fixtures/kubelet Build, which
# returns at once when the cache holds it and it says its version, and
# says so on stderr when it builds).
if needs_build kubelet; then
  if ! CNIFAULT_CACHE="$CACHE" go run ./cmd/cnifault-build "kubelet@$kubelet_tag" >/dev/null; then
    die "building kubelet $kubelet_tag failed"
  fi
  built+=("kubelet $kubelet_tag")
fi

# CRI-O from its module, for each managed line wanted.
if ((${#crio_tags[@]})); then
  CNIFAULT_CACHE="$CACHE" bash hack/build-crio.sh "${crio_tags[@]}"
  for tag in "${crio_tags[@]}"; do built+=("CRI-O $tag"); done
fi

ready="runtimes: ${wanted[*]:-all}; distribution packages: ${apt_packages[*]}"
((${#built[@]})) && ready+="; cached builds: $(IFS=,; echo "${built[*]}" | sed 's/,/, /g')"
log "ready: $ready"
