# cnifault: CNI fault-injection conformance for container runtimes.
#   make e2e [RUNTIME=containerd-1.6|containerd-2.4|crio-1.36|/path/to/containerd/bin|/path/to/crio/bin] [PROCS=N] [KUBELET=1]
#   make kubelet-check [KUBELET_RUNTIMES="containerd-2.4 containerd-1.7 crio-1.36 /path/to/containerd/bin"]
#   make matrix [RUNTIMES="containerd-1.6 crio-1.36 /path/to/containerd/bin"] [JOBS=N]
#   make test
#   make slow [SLOW_RUNTIMES="crio-1.36 containerd-2.4"]   (the catalog on a quarter of one CPU)
#   make image   (the harness's OCI image archive, for the Sonobuoy plugin)
#   make deps [RUNTIME=...] [KUBELET=1]   (KUBELET=1: the pinned kubelet too,
#                for kubelet mode; about 7 minutes the first time)
# Both need root on a Debian or Ubuntu node (apt); `make deps` installs and
# builds what they use: every managed runtime and runc from their Go modules
# at pinned tags, the rest from the distribution (hack/programs.txt).

RUNTIME ?= containerd-2.4
GO      ?= go
OUT     := $(CURDIR)/_output
BIN     := $(OUT)/bin
# Reports go to _output/reports/<runtime>; a bin dir given as RUNTIME is named
# by its path (/opt/vendor/bin -> opt_vendor_bin).
REPORT_DIR ?= $(OUT)/reports/$(subst /,_,$(patsubst /%,%,$(RUNTIME)))
# Ginkgo flags for the suite binary, e.g. GINKGO_FLAGS=-ginkgo.v
GINKGO_FLAGS ?=
# PROCS=N: the catalog in N processes at once, each with its own instance
# of the runtime (cnifault --procs); empty is cnifault's default (2 per
# core), PROCS=1 one process.
PROCS ?=
# cnifault bisect's own flags for make bisect, e.g. BISECT_FLAGS=--pre-releases
BISECT_FLAGS ?=
# A known-failures file for CI gating, e.g. KNOWN_FAILURES=hack/known-failures.yaml
KNOWN_FAILURES ?=
# REQUIRE_COVERAGE=0 lets make e2e pass where an inventory could not read
# every leak kind (hack/gate.sh requires coverage by default; make matrix
# with REQUIRE_COVERAGE=1 does too).
REQUIRE_COVERAGE ?=
# KUBELET=1 (any non-empty value): make deps also builds the pinned kubelet
# into the cache (hack/deps.sh --kubelet); without it no kubelet is built.
KUBELET ?=

# Packages whose tests run in `make test` (hack/sonobuoy: the Sonobuoy plugin
# definition read by Sonobuoy's own loader); the CNI suite itself runs through
# the self-validation, which executes the compiled suite binary.
UNIT_PKGS = ./cniconf/... ./fixtures/... ./cmd/... ./internal/... ./hack/sonobuoy

.PHONY: all deps build e2e matrix test unit selfvalidate vet clean verdict-table soak

all: build

# `make deps` installs everything (what `make test` needs); with RUNTIME
# given, or for `make e2e`, only what that runtime needs (hack/programs.txt);
# for `make matrix`, what RUNTIMES need, and everything without RUNTIMES;
# for `make slow`, what SLOW_RUNTIMES need.
DEPS_RUNTIMES = $(if $(filter test unit selfvalidate,$(MAKECMDGOALS)),,$(if $(filter matrix,$(MAKECMDGOALS)),$(RUNTIMES),$(if $(filter slow,$(MAKECMDGOALS)),$(SLOW_RUNTIMES),$(if $(or $(filter-out file,$(origin RUNTIME)),$(filter e2e,$(MAKECMDGOALS))),$(RUNTIME)))))

deps:
	bash hack/deps.sh $(if $(KUBELET),--kubelet) $(DEPS_RUNTIMES)

build: $(BIN)/cnifault-pause $(BIN)/cni-fault $(BIN)/cnifault-runc-wrapper $(BIN)/cnifault-nri $(BIN)/cnifault

# The harness's identity, stamped into cnifault and cni-fault (-ldflags
# -X): the release tag the checkout is at (none on an untagged commit:
# the build says "devel"), the commit ("-dirty" with uncommitted changes)
# and the CNI plugins' version go.mod pins. `cnifault version` prints
# them, every report carries them. Without git (a source tarball) they
# stay empty and the build says so.
HARNESS_VERSION ?= $(shell git describe --tags --exact-match --match 'v[0-9]*' 2>/dev/null)
HARNESS_COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)$(shell git diff --quiet HEAD -- 2>/dev/null || echo -dirty)
CNI_PLUGINS_VERSION ?= $(shell $(GO) list -m -f '{{.Version}}' github.com/containernetworking/plugins 2>/dev/null)
HARNESS_LDFLAGS = -X github.com/cnifault/cnifault/fixtures/cli.version=$(HARNESS_VERSION) \
  -X github.com/cnifault/cnifault/fixtures/cli.commit=$(HARNESS_COMMIT) \
  -X github.com/cnifault/cnifault/fixtures/cli.cniPlugins=$(CNI_PLUGINS_VERSION)
FAULT_LDFLAGS = -X main.harnessVersion=$(HARNESS_VERSION) -X main.harnessCommit=$(HARNESS_COMMIT)

# Binaries are built beside their target and renamed into place, so that a
# run at once in the same checkout (two `make e2e`) never executes one half
# written: it sees the old file or the new one.
INSTALL_BIN = mv -f $@.$$$$.tmp $@

# -E main.rt0: the pause handles SIGTERM from its first instruction, as
# pause.c does (cmd/cnifault-pause/entry_amd64.s; amd64 only).
PAUSE_ENTRY = $(if $(filter amd64,$(shell $(GO) env GOARCH)),\ -E\ main.rt0)

$(BIN)/cnifault-pause: FORCE
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags=-s\ -w$(PAUSE_ENTRY) -o $@.$$$$.tmp ./cmd/cnifault-pause && $(INSTALL_BIN)

$(BIN)/cni-fault: FORCE
	CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=false -ldflags '$(FAULT_LDFLAGS)' -o $@.$$$$.tmp ./cmd/cni-fault && $(INSTALL_BIN)

# runc stand-in for CRI-O on hosts that refuse to lower oom_score_adj.
$(BIN)/cnifault-runc-wrapper: FORCE
	CGO_ENABLED=0 $(GO) build -trimpath -o $@.$$$$.tmp ./cmd/cnifault-runc-wrapper && $(INSTALL_BIN)

# The NRI fault plugin, which managed runtimes launch from their own NRI
# plugin dir.
$(BIN)/cnifault-nri: FORCE
	CGO_ENABLED=0 $(GO) build -trimpath -o $@.$$$$.tmp ./cmd/cnifault-nri && $(INSTALL_BIN)

# The cnifault binary is the CNI suite compiled, as critest is: it runs on a
# node without a Go toolchain. Static (CGO_ENABLED=0), so that it runs in
# the harness image, which has no libc; -trimpath and -buildvcs=false keep
# the build, and so the image's digest, the same for the same source (the
# stamped commit is the source's).
$(BIN)/cnifault: FORCE
	CGO_ENABLED=0 $(GO) test -c -trimpath -buildvcs=false -ldflags '$(HARNESS_LDFLAGS)' -o $@.$$$$.tmp ./suites/cni && $(INSTALL_BIN)

# The harness's image (cnifault and cni-fault, fixtures/image HarnessSpec)
# as an OCI image archive, built in Go without a registry or container
# engine; prints its reference and digest, the same for the same binaries.
# Load it with `ctr -n k8s.io images import`, or push it with
# `skopeo copy oci-archive:_output/cnifault-image.oci.tar docker://REGISTRY/…`.
IMAGE ?= $(OUT)/cnifault-image.oci.tar
.PHONY: image
image: $(BIN)/cni-fault $(BIN)/cnifault
	$(GO) run ./cmd/cnifault-image --bin-dir $(BIN) --out $(IMAGE)

# hack/gate.sh holds the suite's command line (also CI's gate, which needs
# cnifault's own exit status, not make's). Both it and sh exec, so the suite
# binary is make's child and learns of make's death (PR_SET_PDEATHSIG) to
# tear down.
e2e: deps build
	exec env CNIFAULT_GATE_PREPARED=1 RUNTIME='$(RUNTIME)' REPORT_DIR='$(REPORT_DIR)' KNOWN_FAILURES='$(KNOWN_FAILURES)' REQUIRE_COVERAGE='$(REQUIRE_COVERAGE)' PROCS='$(PROCS)' bash hack/gate.sh $(if $(KUBELET),--kubelet) $(GINKGO_FLAGS)

# Kubelet mode (cnifault --kubelet) on each of KUBELET_RUNTIMES, one after
# the other (hack/kubelet-check.sh): the scenarios whose verdict depends on
# kubelet, each also under the pinned real kubelet, judged by whether
# kubelet's outcome agrees with the plain run's model; reports in
# _output/kubelet-check/<runtime>/. A bin dir (Debian's containerd 1.6.20,
# its .deb unpacked) is a runtime too.
KUBELET_RUNTIMES ?= containerd-2.4 containerd-1.7 crio-1.36
.PHONY: kubelet-check
kubelet-check: build
	bash hack/kubelet-check.sh $(KUBELET_RUNTIMES)

# The catalog on several runtimes side by side (at most JOBS at once, each
# its own instance) into one scenario × runtime matrix (hack/matrix.sh,
# `cnifault matrix`): each runtime's reports and run.log under
# MATRIX_DIR/<runtime>/, and MATRIX_DIR/matrix.md, .html and .json. Without
# RUNTIMES every managed runtime (cnifault's list); JOBS defaults to the
# core count. Each run gets the gate's flags, KNOWN_FAILURES and GINKGO_FLAGS.
RUNTIMES ?=
JOBS ?=
MATRIX_DIR ?= $(OUT)/matrix
matrix: deps build
	exec env CNIFAULT_GATE_PREPARED=1 RUNTIMES='$(RUNTIMES)' JOBS='$(JOBS)' MATRIX_DIR='$(MATRIX_DIR)' KNOWN_FAILURES='$(KNOWN_FAILURES)' REQUIRE_COVERAGE='$(REQUIRE_COVERAGE)' PROCS='$(PROCS)' bash hack/matrix.sh $(GINKGO_FLAGS)

# image: the self-validation runs it as the Sonobuoy plugin's pod would
# (suites/selfvalidation/fleet_test.go).
test: deps build image vet unit selfvalidate

# The benchmark (not a timed test; cmd/cnifault-bench): every managed
# runtime's catalog in one process and in parallel processes, the
# reference runtimes' for each PROCS from 1 to 6, the floor each parallel
# catalog has on this machine, the matrix of parallel catalogs side by
# side, and make test's time from .ci/run's record, judged against the
# targets (docs/performance.md). About an hour on 2 cores;
# BENCH_FLAGS=--runtimes=containerd-2.4 --sweep= --no-matrix for a part.
BENCH_FLAGS ?=
.PHONY: bench
bench: deps build
	$(GO) run ./cmd/cnifault-bench $(if $(JOBS),--jobs $(JOBS)) $(BENCH_FLAGS)

# Repeatability: the whole catalog N times on each of RUNTIMES, reporting any
# scenario whose verdict or leaked kinds changed between runs (hack/soak.sh).
# RUNTIMES is shared with `make matrix`, whose default (every managed
# runtime) differs: left empty, soak takes hack/soak.sh's own default,
# containerd-1.6 containerd-2.4 crio-1.34.
N ?= 3
soak:
	N='$(N)' RUNTIMES='$(RUNTIMES)' bash hack/soak.sh

# The first containerd tag between GOOD and BAD at which SCENARIO's verdict
# or leaked kinds change (cnifault bisect), each tag run with the gate's
# flags: make bisect SCENARIO=no-cni-config GOOD=v1.7.18 BAD=v1.7.35. GOOD
# may be the newer end (a fix). BISECT_FLAGS are the command's own, e.g.
# --pre-releases.
# deps gets what any containerd build needs (the family, containerd: the
# bisect builds its tags into the cache itself).
.PHONY: bisect
bisect: build
	bash hack/deps.sh containerd
	exec $(BIN)/cnifault bisect --scenario '$(SCENARIO)' --good '$(GOOD)' --bad '$(BAD)' $(BISECT_FLAGS) \
	  --report-dir $(OUT)/bisect/$(SCENARIO) --work-dir $(OUT)/work --cni-plugin-dir $(OUT)/cni/bin \
	  --pause-binary $(BIN)/cnifault-pause --fault-plugin $(BIN)/cni-fault --runc-wrapper $(BIN)/cnifault-runc-wrapper \
	  --nri-plugin $(BIN)/cnifault-nri -- -ginkgo.fail-on-empty -ginkgo.timeout=20m $(GINKGO_FLAGS)

vet:
	$(GO) vet ./...

# Static checks: go vet; actionlint (pinned as a tool in go.mod) on the CI
# workflows; and the workflows' honesty (internal/deps): e2e.yml's jobs are
# every line of the runtime tables, with no runtime or version of its own,
# each running make deps and hack/gate.sh under hack/known-failures.yaml,
# the file make test pins its verdicts from; no binary is tracked
# (internal/deps TestNoBinaryIsTracked); and the README's CI job, the one a
# runtime project copies, is a valid workflow. actionlint also runs
# shellcheck on `run:` scripts when shellcheck is installed (apt-get
# install shellcheck); without it, that check is skipped. And the runtime
# tables pin each release line's newest tag: listed by the Go module proxy
# or served when asked by name (fixtures/modproxy), so this target asks the
# proxy (GOPROXY) and turns red the day upstream publishes a patch; make
# unit tests the check on a fake proxy only. Needs neither root nor a
# runtime.
.PHONY: lint
lint:
	$(GO) vet ./...
	$(GO) tool actionlint $(if $(shell command -v shellcheck),,-shellcheck=) .github/workflows/*.yml
	CNIFAULT_CHECK_NEWEST=1 $(GO) test -count=1 -run '^(TestRuntimeTablesAreWellFormed|TestRuntimeTablesPinTheNewestTagOfEachLine|TestE2E.*|TestNoBinaryIsTracked|TestTheREADMEsCIJobIsAValidWorkflow)$$' ./internal/deps

unit:
	CNIFAULT_REQUIRE=1 $(GO) test -count=1 $(UNIT_PKGS)

# Ginkgo's JSON report of the self-validation: make bench reads it to say
# where make test's time went.
SELFVALIDATION_REPORT ?= $(CURDIR)/_output/selfvalidation.json

# The bound is the package's: the matrix of every managed runtime (ten, two
# at a time: about 9.5 minutes on a loaded 2-core machine) is only part of it,
# and so is containerd-2.4's catalog on a quarter of one CPU (the slow node:
# 5-6 minutes on a loaded machine).
selfvalidate:
	CNIFAULT_REQUIRE=1 CNIFAULT_SUITE_BINARY=$(BIN)/cnifault $(GO) test -count=1 -timeout 105m ./suites/selfvalidation -args -ginkgo.json-report=$(SELFVALIDATION_REPORT)

# The slow node (suites/selfvalidation/slow_node_test.go): the catalog of
# each of SLOW_RUNTIMES with the harness, the runtime, its shims and plugins
# (and its pods) in one cgroup limited to a quarter of one CPU, pinned to
# the same verdicts and signatures as the idle run. make test runs it for
# containerd-2.4; crio-1.36 (about 13 minutes) runs here. Needs root.
SLOW_RUNTIMES ?= crio-1.36
.PHONY: slow
slow: deps build
	CNIFAULT_REQUIRE=1 CNIFAULT_SUITE_BINARY=$(BIN)/cnifault CNIFAULT_SLOW_RUNTIMES='$(SLOW_RUNTIMES)' \
	  $(GO) test -v -count=1 -timeout 120m ./suites/selfvalidation -ginkgo.label-filter=slow-node -ginkgo.v $(GINKGO_FLAGS)

# docs/scenarios.md, generated from the catalog and the expectations file
# (cnifault docs): make test fails where it is stale (the self-validation's
# docs spec), so a new scenario, or a changed expectation, is documented
# with the change.
.PHONY: docs
docs: $(BIN)/cnifault
	$(BIN)/cnifault docs --known-failures hack/known-failures.yaml > docs/scenarios.md.tmp && mv -f docs/scenarios.md.tmp docs/scenarios.md

# The verdict matrix of docs/runtimes.md, from the reports `make matrix` wrote: every
# MATRIX_DIR/*/report.json, one column each in the order of their dir names.
# Run `make matrix` (every managed runtime) first, into a MATRIX_DIR that
# holds no reports of other runtimes from an earlier matrix.
verdict-table: $(BIN)/cnifault
	$(BIN)/cnifault compare --readme docs/runtimes.md $(sort $(wildcard $(MATRIX_DIR)/*/report.json))

clean:
	rm -rf $(OUT)

FORCE:
