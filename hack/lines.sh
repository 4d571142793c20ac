# The one reader of the managed runtime tables, hack/containerd-lines.txt and
# hack/crio-lines.txt, for hack/deps.sh and hack/e2e-matrix.sh (sourced from
# the repository's root). Each table is one family's release lines:
#
#   <family>-<major>.<minor>   v<major>.<minor>.<patch>
#
# managed_lines checks every row and prints "<name> <version> <cache>" for
# each, containerd's lines first, then CRI-O's, each table in its order;
# <cache> is the dir hack/deps.sh builds the line into under
# $CNIFAULT_CACHE (cache_dir_name: <family>-<version>-r<recipe>). Every
# line is built from its module: none is a distribution's package.
# A bad row is one line on stderr naming the table's line, and status 2:
# the values go into JSON, cache paths and commands unquoted.

# shellcheck shell=bash

RUNTIME_TABLES=(containerd:hack/containerd-lines.txt crio:hack/crio-lines.txt)

# The version of each family's build recipe (its flags, tags, sources), in
# the name of every build's cache dir: a change to how a family is built
# raises it, so that each cached build is made again by the new recipe (on
# a node and in CI's cache, whose keys are the dir names), and the builds
# of the old recipe stay for checkouts that still use them.
# fixtures/containerd and fixtures/crio BuildRecipe are the same
# (internal/deps checks). 2: the version flags each runtime's own Makefile
# sets (containerd's version.Version, Revision and Package; CRI-O's
# buildCommit where the tag has it).
declare -A BUILD_RECIPE=([containerd]=2 [crio]=2)

# cache_dir_name FAMILY TAG prints the cache dir of a build of TAG.
cache_dir_name() { echo "$1-$2-r${BUILD_RECIPE[$1]}"; }

managed_lines() {
  local entry family table n name version extra line rows=0
  local -A seen=()
  for entry in "${RUNTIME_TABLES[@]}"; do
    family=${entry%%:*} table=${entry#*:}
    [[ -r $table ]] || { echo "hack/lines.sh: cannot read $table" >&2; return 2; }
    n=0
    while read -r name version extra; do
      n=$((n + 1))
      [[ -z $name || $name == \#* ]] && continue
      if [[ ! $name =~ ^$family-([0-9]+\.[0-9]+)$ || -z $version || -n $extra ]]; then
        echo "$table:$n: want $family-<major>.<minor> v<major>.<minor>.<patch>" >&2
        return 2
      fi
      line=${BASH_REMATCH[1]}
      if [[ -n ${seen[$name]:-} ]]; then
        echo "$table:$n: $name is listed again (first at line ${seen[$name]})" >&2
        return 2
      fi
      seen[$name]=$n
      if [[ $version =~ ^v([0-9]+\.[0-9]+)\.[0-9]+$ && ${BASH_REMATCH[1]} == "$line" ]]; then
        echo "$name $version $(cache_dir_name "$family" "$version")"
      else
        echo "$table:$n: $name's version $version is not v$line.<patch>" >&2
        return 2
      fi
      rows=$((rows + 1))
    done <"$table"
  done
  ((rows)) || { echo "hack/lines.sh: the tables list no managed runtime" >&2; return 2; }
}
