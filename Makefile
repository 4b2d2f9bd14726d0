# peerrelay — Tailscale peer relays on Kubernetes, the Crossplane way.
#
#   make render   build and start the function, render examples/ through the
#                 real Crossplane renderer, print every composed resource
#   make test     the whole suite: unit + integration against real parts
#   make demo     the README's install and a relayed ping, on this machine

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

BIN ?= $(CURDIR)/.cache/bin
export PEERRELAY_TOOLS_BIN := $(BIN)
GO ?= go

# Tools are linked without symbol tables or DWARF: they are run, never
# debugged, and the linker does half the work (kube-apiserver: 9 s → 4.6 s).
TOOL_LDFLAGS := -s -w
space := $(subst ,, )

K8S_VERSION := v1.36.3
K8S_LDFLAGS := -X k8s.io/component-base/version.gitVersion=$(K8S_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 \
	-X k8s.io/component-base/version.gitMinor=36 \
	-X k8s.io/component-base/version.gitTreeState=clean

PROMETHEUS_OPERATOR_CRDS := $(CURDIR)/.cache/prometheus-operator-crds/v0.95.2

# A real node (test/harness/node): kubelet, kube-proxy and kube-scheduler at
# the API server's version, CoreDNS, containerd 2 and its runc shim, runc with
# seccomp (Debian's libseccomp-dev), the CNI plugins the node's network uses,
# and Kubernetes' own pause program for the pod sandboxes (from the
# kubernetes module; no registry serves it here). Defined before TOOLS, which
# := expands at once.
CNI_PLUGINS := bridge host-local loopback portmap
NODE_TOOLS := $(BIN)/kubelet $(BIN)/kube-proxy $(BIN)/kube-scheduler $(BIN)/coredns $(BIN)/containerd $(BIN)/containerd-shim-runc-v2 $(BIN)/runc $(BIN)/pause \
	$(addprefix $(BIN)/cni/,$(CNI_PLUGINS))

TOOLS := $(BIN)/kube-apiserver $(BIN)/kubectl $(BIN)/kube-controller-manager $(BIN)/etcd $(BIN)/crank \
	$(BIN)/crossplane $(BIN)/helm $(BIN)/controller-gen $(BIN)/angryjet $(BIN)/tailscaled $(BIN)/tailscale $(BIN)/containerboot $(BIN)/function-patch-and-transform \
	$(BIN)/promtool $(BIN)/prometheus $(CURDIR)/.cache/upbound-crds/v1.23.0 $(PROMETHEUS_OPERATOR_CRDS) \
	$(NODE_TOOLS)

.PHONY: all tools check-tools build generate check-generate render test test-matrix unit lint fuzz xpkg xpkg-previous release bench vulncheck clean demo

all: build

# ---- test tools, each from its own wrapper module under tools --------
# A tool is rebuilt only when its go.mod or go.sum changes; the Go build cache
# makes a rebuild after a fresh clone take seconds to a minute.
tools: $(TOOLS)

# What the checks beside the tests use (lint, vulncheck, packaging, bench);
# .ci/run builds them with the test tools, two builds at a time.
CHECK_TOOLS := $(BIN)/golangci-lint $(BIN)/govulncheck $(BIN)/indexdb $(BIN)/cyclonedx-gomod $(BIN)/benchstat
check-tools: $(CHECK_TOOLS)

# The Prometheus Operator's CRDs (PodMonitor among them), generated from its
# API module by controller-gen as its own release does, for the system test
# to install as a cluster with the Prometheus Operator has them.
$(PROMETHEUS_OPERATOR_CRDS): tools/prometheus-operator/go.mod tools/prometheus-operator/go.sum $(BIN)/controller-gen
	cd tools/prometheus-operator && $(BIN)/controller-gen crd:maxDescLen=0 paths=github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1 output:crd:artifacts:config=$@.tmp
	rm -rf $@ && mv $@.tmp $@

# The Upbound AWS CRDs the render test dry-runs the composed AWS managed
# resources against (module proxy, hash pinned in the script).
$(CURDIR)/.cache/upbound-crds/v1.23.0: hack/upbound-crds.sh
	bash hack/upbound-crds.sh

# The Kubernetes binaries from one `go build`: one process compiles the tree
# they share once (two processes under make -j would each compile it).
KUBE_CMDS := kube-apiserver kubectl kube-controller-manager kubelet kube-scheduler kube-proxy
$(addprefix $(BIN)/,$(KUBE_CMDS)) &: tools/kube-apiserver/go.mod tools/kube-apiserver/go.sum
	@mkdir -p $(BIN)
	cd tools/kube-apiserver && $(GO) build -ldflags "$(TOOL_LDFLAGS) $(K8S_LDFLAGS)" -o $(BIN)/ $(addprefix k8s.io/kubernetes/cmd/,$(KUBE_CMDS))

# CoreDNS with the plugins the node's cluster DNS uses (tools/coredns/main.go).
$(BIN)/coredns: tools/coredns/go.mod tools/coredns/go.sum tools/coredns/main.go
	@mkdir -p $(BIN)
	cd tools/coredns && $(GO) build -ldflags "$(TOOL_LDFLAGS)" -o $@ .

# pause.c as Kubernetes builds its pause image: static, so the image holds
# one file.
$(BIN)/pause: tools/kube-apiserver/go.mod tools/kube-apiserver/go.sum
	@mkdir -p $(BIN)
	cd tools/kube-apiserver && gcc -Os -static -DVERSION=$(K8S_VERSION) -o $@ "$$($(GO) list -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause/linux/pause.c"

# No btrfs or devmapper snapshotters (cgo headers this machine lacks; the
# node uses overlayfs).
$(BIN)/containerd $(BIN)/containerd-shim-runc-v2 &: tools/containerd/go.mod tools/containerd/go.sum
	@mkdir -p $(BIN)
	cd tools/containerd && $(GO) build -tags "no_btrfs no_devmapper no_zfs" -ldflags "$(TOOL_LDFLAGS)" -o $(BIN)/ github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2

$(BIN)/runc: tools/runc/go.mod tools/runc/go.sum
	@mkdir -p $(BIN)
	cd tools/runc && CGO_ENABLED=1 $(GO) build -tags seccomp -ldflags "$(TOOL_LDFLAGS)" -o $@ github.com/opencontainers/runc

$(addprefix $(BIN)/cni/,$(CNI_PLUGINS)) &: tools/cni-plugins/go.mod tools/cni-plugins/go.sum
	@mkdir -p $(BIN)/cni
	cd tools/cni-plugins && $(GO) build -ldflags "$(TOOL_LDFLAGS)" -o $(BIN)/cni/ $$($(GO) list -f '{{.ImportPath}}' github.com/containernetworking/plugins/plugins/... | grep -E '/($(subst $(space),|,$(CNI_PLUGINS)))$$')

# Crossplane core (test/crossplane runs it against the API server). Without a
# version every package is refused as incompatible.
CROSSPLANE_VERSION := v2.4.0
$(BIN)/crossplane: tools/crossplane/go.mod tools/crossplane/go.sum
	@mkdir -p $(BIN)
	cd tools/crossplane && $(GO) build -ldflags "$(TOOL_LDFLAGS) -X github.com/crossplane/crossplane-runtime/v2/pkg/version.version=$(CROSSPLANE_VERSION)" -o $@ github.com/crossplane/crossplane/v2/cmd/crossplane

# helm renders Crossplane's own chart (RBAC) from the module cache.
$(BIN)/helm: tools/helm/go.mod tools/helm/go.sum
	@mkdir -p $(BIN)
	cd tools/helm && $(GO) build -ldflags "$(TOOL_LDFLAGS)" -o $@ helm.sh/helm/v4/cmd/helm

$(BIN)/etcd: tools/etcd/go.mod tools/etcd/go.sum
	@mkdir -p $(BIN)
	cd tools/etcd && $(GO) build -ldflags "$(TOOL_LDFLAGS)" -o $@ go.etcd.io/etcd/server/v3

$(BIN)/crank: tools/crank/go.mod tools/crank/go.sum
	@mkdir -p $(BIN)
	cd tools/crank && $(GO) build -ldflags "$(TOOL_LDFLAGS)" -o $@ github.com/crossplane/crossplane/v2/cmd/crank

$(BIN)/controller-gen: tools/controller-gen/go.mod tools/controller-gen/go.sum
	@mkdir -p $(BIN)
	cd tools/controller-gen && $(GO) build -ldflags "$(TOOL_LDFLAGS)" -o $@ sigs.k8s.io/controller-tools/cmd/controller-gen

# angryjet generates the managed resource and provider config methods.
$(BIN)/angryjet: tools/angryjet/go.mod tools/angryjet/go.sum
	@mkdir -p $(BIN)
	cd tools/angryjet && $(GO) build -ldflags "$(TOOL_LDFLAGS)" -o $@ github.com/crossplane/crossplane-tools/cmd/angryjet

# tailscaled, its CLI, and containerboot: what the tailscale image runs as
# its entrypoint (the relay pods' image, built by the system test).
$(BIN)/tailscaled $(BIN)/tailscale $(BIN)/containerboot &: tools/tailscale/go.mod tools/tailscale/go.sum
	@mkdir -p $(BIN)
	cd tools/tailscale && CGO_ENABLED=0 $(GO) build -ldflags "$(TOOL_LDFLAGS)" -o $(BIN)/ tailscale.com/cmd/tailscaled tailscale.com/cmd/tailscale tailscale.com/cmd/containerboot

$(BIN)/function-patch-and-transform: tools/patch-and-transform/go.mod tools/patch-and-transform/go.sum
	@mkdir -p $(BIN)
	cd tools/patch-and-transform && $(GO) build -ldflags "$(TOOL_LDFLAGS)" -o $@ github.com/crossplane-contrib/function-patch-and-transform

$(BIN)/golangci-lint: tools/golangci-lint/go.mod tools/golangci-lint/go.sum
	@mkdir -p $(BIN)
	cd tools/golangci-lint && $(GO) build -ldflags "$(TOOL_LDFLAGS)" -o $@ github.com/golangci/golangci-lint/v2/cmd/golangci-lint

# Prometheus and its promtool: the alert rules' unit tests (test/alerts),
# and a real server scraping the provider and the relays in the system test
# (every dashboard query, every alert rule); without their service
# discovery plugins, which they do not need here.
$(BIN)/promtool $(BIN)/prometheus &: tools/prometheus/go.mod tools/prometheus/go.sum
	@mkdir -p $(BIN)
	cd tools/prometheus && $(GO) build -tags remove_all_sd -ldflags "$(TOOL_LDFLAGS)" -o $(BIN)/ github.com/prometheus/prometheus/cmd/promtool github.com/prometheus/prometheus/cmd/prometheus

# CycloneDX SBOMs of our binaries, from the module graph Go records in them.
$(BIN)/cyclonedx-gomod: tools/cyclonedx-gomod/go.mod tools/cyclonedx-gomod/go.sum
	@mkdir -p $(BIN)
	cd tools/cyclonedx-gomod && $(GO) build -ldflags "$(TOOL_LDFLAGS)" -o $@ github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod

$(BIN)/benchstat: tools/benchstat/go.mod tools/benchstat/go.sum
	@mkdir -p $(BIN)
	cd tools/benchstat && $(GO) build -ldflags "$(TOOL_LDFLAGS)" -o $@ golang.org/x/perf/cmd/benchstat

$(BIN)/govulncheck: tools/govulncheck/go.mod tools/govulncheck/go.sum
	@mkdir -p $(BIN)
	cd tools/govulncheck && $(GO) build -ldflags "$(TOOL_LDFLAGS)" -o $@ golang.org/x/vuln/cmd/govulncheck

$(BIN)/indexdb: tools/vulndb/go.mod tools/vulndb/go.sum
	@mkdir -p $(BIN)
	cd tools/vulndb && $(GO) build -ldflags "$(TOOL_LDFLAGS)" -o $@ golang.org/x/vulndb/cmd/indexdb

# ---- product ---------------------------------------------------------------
build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/function-peerrelay ./fn/cmd/function-peerrelay
	$(GO) build -o $(BIN)/provider-peerrelay ./provider/cmd/provider-peerrelay

# Deepcopy methods, the managed resource and provider config methods
# (angryjet), provider CRDs, the function's Input CRD, the PeerRelay
# XRDs (from the PeerRelay CRD, by hack/xrdgen) and the PeerRelay CRD the
# tests validate rendered XRs against.
generate: $(BIN)/controller-gen $(BIN)/angryjet
	$(BIN)/controller-gen object:headerFile=hack/boilerplate.go.txt paths=./apis/...
	$(BIN)/angryjet generate-methodsets --header-file=hack/boilerplate.go.txt ./apis/...
	rm -rf package/provider/crds package/function/input apis/peerrelay/crd
	$(BIN)/controller-gen crd paths=./apis/relay/... output:crd:artifacts:config=package/provider/crds
	$(BIN)/controller-gen crd paths=./apis/fn/... output:crd:artifacts:config=package/function/input
	$(BIN)/controller-gen crd paths=./apis/peerrelay/... output:crd:artifacts:config=apis/peerrelay/crd
	$(GO) run ./hack/xrdgen -crd apis/peerrelay/crd/peerrelay.io_peerrelays.yaml -out package/configuration

# Fails when a generated file is stale: run `make generate` and commit.
check-generate: generate
	@if [ -n "$$(git status --porcelain -- apis package apis/peerrelay/crd)" ]; then \
		git status --porcelain -- apis package apis/peerrelay/crd; git --no-pager diff --stat -- apis package apis/peerrelay/crd; \
		echo "generated files are stale: run 'make generate' and commit the result"; exit 1; fi

# ---- Crossplane packages, built without Docker -----------------------------
# Static binaries on a distroless-like base (hack/imagebuild: CA roots, /tmp,
# user 65532, the binary's CycloneDX SBOM at /sbom.cdx.json, OCI labels with
# VERSION), embedded into each package by the Crossplane CLI, once per
# architecture (ARCHES). The configuration is staged with its dependencies
# pinned to VERSION's minor line (hack/pinconfig). Output:
# $(XPKG)/<package>-$(VERSION)-<arch>.xpkg and
# configuration-peerrelay-$(VERSION).xpkg, the SBOMs beside them;
# `crossplane xpkg push -f a.xpkg,b.xpkg` pushes the architectures of a
# package as one image index.
XPKG ?= $(CURDIR)/.cache/xpkg
VERSION ?= v0.2.0
REGISTRY ?= xpkg.crossplane.io/peerrelay
XPKG_LDFLAGS := -s -w -buildid=
ARCHES ?= amd64 arm64

xpkg: $(BIN)/crank $(BIN)/cyclonedx-gomod
	@mkdir -p $(XPKG)
	rm -f $(XPKG)/*.xpkg $(XPKG)/*.cdx.json
	$(GO) build -o $(XPKG)/imagebuild ./hack/imagebuild
	for arch in $(ARCHES); do \
	  mkdir -p $(XPKG)/$$arch; \
	  for p in function provider; do \
	    CGO_ENABLED=0 GOARCH=$$arch $(GO) build -trimpath -ldflags "$(XPKG_LDFLAGS)" -o $(XPKG)/$$arch/$$p-peerrelay ./$${p/function/fn}/cmd/$$p-peerrelay; \
	    $(BIN)/cyclonedx-gomod bin -json -std -noserial -notimestamp -version $(VERSION) -output $(XPKG)/$$p-peerrelay-$(VERSION)-$$arch.cdx.json $(XPKG)/$$arch/$$p-peerrelay; \
	  done; \
	  $(XPKG)/imagebuild -arch $$arch -binary $(XPKG)/$$arch/function-peerrelay -port 9443 -version $(VERSION) -sbom $(XPKG)/function-peerrelay-$(VERSION)-$$arch.cdx.json -tag $(REGISTRY)/function-peerrelay-runtime:$(VERSION) -o $(XPKG)/$$arch/function-image.tar; \
	  $(XPKG)/imagebuild -arch $$arch -binary $(XPKG)/$$arch/provider-peerrelay -version $(VERSION) -sbom $(XPKG)/provider-peerrelay-$(VERSION)-$$arch.cdx.json -tag $(REGISTRY)/provider-peerrelay-runtime:$(VERSION) -o $(XPKG)/$$arch/provider-image.tar; \
	  $(BIN)/crank xpkg build --package-root=package/function --examples-root=examples/package --embed-runtime-image-tarball=$(XPKG)/$$arch/function-image.tar -o $(XPKG)/function-peerrelay-$(VERSION)-$$arch.xpkg; \
	  $(BIN)/crank xpkg build --package-root=package/provider --examples-root=examples/package --embed-runtime-image-tarball=$(XPKG)/$$arch/provider-image.tar -o $(XPKG)/provider-peerrelay-$(VERSION)-$$arch.xpkg; \
	done
	$(GO) run ./hack/pinconfig -src package/configuration -dst $(XPKG)/configuration-root -version $(VERSION)
	$(BIN)/crank xpkg build --package-root=$(XPKG)/configuration-root --examples-root=examples/package -o $(XPKG)/configuration-peerrelay-$(VERSION).xpkg

# A release: `make release VERSION=vX.Y.Z` builds every package for every
# architecture with that version into .cache/release/vX.Y.Z, with the
# SBOMs, once CHANGELOG.md has its entry. Push them as the README says.
release:
	@if [ "$(origin VERSION)" != "command line" ]; then echo "make release VERSION=vX.Y.Z: name the version"; exit 1; fi
	@grep -qxF '## $(VERSION)' CHANGELOG.md || { echo "CHANGELOG.md has no '## $(VERSION)' entry: write it first"; exit 1; }
	$(MAKE) xpkg VERSION=$(VERSION) ARCHES="amd64 arm64" XPKG=$(CURDIR)/.cache/release/$(VERSION)
	@ls -1 $(CURDIR)/.cache/release/$(VERSION)/*.xpkg $(CURDIR)/.cache/release/$(VERSION)/*.cdx.json

# The previous release, for the upgrade test (test/crossplane TestUpgrade):
# its commit's tree built as that commit builds it, once (amd64: the test's
# node), into .cache/previous/$(PREVIOUS_VERSION).
PREVIOUS_VERSION := v0.1.0
PREVIOUS_COMMIT := a70e90741d550eb7aa3da5acbe7b59735d963c28
PREVIOUS := $(CURDIR)/.cache/previous/$(PREVIOUS_VERSION)
xpkg-previous: $(PREVIOUS)/xpkg/configuration-peerrelay-$(PREVIOUS_VERSION).xpkg
$(PREVIOUS)/xpkg/configuration-peerrelay-$(PREVIOUS_VERSION).xpkg: | $(BIN)/crank
	rm -rf $(PREVIOUS) && mkdir -p $(PREVIOUS)/src
	git cat-file -e $(PREVIOUS_COMMIT)^{commit} 2>/dev/null || git fetch --depth=1 origin $(PREVIOUS_COMMIT)
	git archive $(PREVIOUS_COMMIT) | tar -x -C $(PREVIOUS)/src
	$(MAKE) -C $(PREVIOUS)/src xpkg VERSION=$(PREVIOUS_VERSION) ARCHES=amd64 BIN=$(BIN) XPKG=$(PREVIOUS)/xpkg

# Each case is rendered by the same test that checks it against its golden
# file (test/render), which prints it here.
render: build $(BIN)/crank $(BIN)/function-patch-and-transform
	@$(GO) test -c -o $(CURDIR)/.cache/render.test ./test/render
	@cd test/render && PEERRELAY_RENDER_PRINT=1 $(CURDIR)/.cache/render.test -test.run '^TestRenderExamples$$/^Golden$$'

lint: $(BIN)/golangci-lint
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(BIN)/golangci-lint run ./...

# The unit tier: no binaries, seconds. The function's builders and the
# provider's controller against controller-runtime's fake client. -short
# skips every test that needs a real part (harness.Need).
unit:
	$(GO) test -short -count=1 ./fn/... ./provider/... ./apis/...

# Every tier: unit, integration (the provider against a real API server,
# moto and DNS) and the system tests in test/ (real Crossplane, real pods).
# The system suite (test/crossplane) runs for 16 to 17 minutes on 2 cores,
# past go test's default 10-minute timeout.
# The system tests first: go test starts packages in the order named, two at
# a time, and test/crossplane is the longest by far, so every other package
# runs beside it instead of before it. hack/testdigest prints go test's
# output and ends it with each failed test's last lines, since CI shows only
# a run's tail (-json makes the output verbose: every test's log is there).
test: tools build xpkg xpkg-previous
	$(GO) build -o $(BIN)/testdigest ./hack/testdigest
	$(GO) test -json -count=1 -timeout 30m ./test/crossplane ./... | $(BIN)/testdigest

# The system suite (test/crossplane) against other Crossplane core versions
# (each built once from the module proxy into .cache/matrix/<version>). Not
# part of `make test`: about 10 minutes a version on 2 cores. The packages
# require v2.4.0 since the suite failed on v2.2.1 and v2.3.0 (README); set
# MATRIX to a new core's version to check it.
MATRIX ?= v2.2.1 v2.3.0
test-matrix: tools build xpkg
	@failed=""; for v in $(MATRIX); do \
	  bash hack/crossplane-version.sh $$v; \
	  echo "::: Crossplane $$v"; \
	  PEERRELAY_CROSSPLANE_VERSION=$$v $(GO) test -count=1 -timeout 30m -run '^TestCrossplane$$' ./test/crossplane || failed="$$failed $$v"; \
	done; \
	if [ -n "$$failed" ]; then echo "failed with Crossplane$$failed"; exit 1; fi

# The README's install and a relayed ping on this machine, no cloud (root:
# the pods get network namespaces). The test binary is run directly so that
# what it prints streams as it happens.
demo: tools build xpkg
	$(GO) test -c -o $(CURDIR)/.cache/demo.test ./test/crossplane
	PEERRELAY_DEMO=1 $(CURDIR)/.cache/demo.test -test.run '^TestDemo$$' -test.timeout 15m

# Fuzz the function and the endpoint parser. Budgets are execution counts,
# about 45 s each on 2 cores: a -fuzztime duration races Go 1.26's fuzz
# coordinator at its deadline (go.dev/issue/75804, fixed in Go 1.27) and
# fails a run that found nothing with "context deadline exceeded". Set
# FUZZTIME (a duration or a count) to use one budget for all three.
FUZZTIME ?=
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzRunFunction$$' -fuzztime $(or $(FUZZTIME),150000x) ./fn
	$(GO) test -run '^$$' -fuzz '^FuzzAWSPlacement$$' -fuzztime $(or $(FUZZTIME),150000x) ./fn
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(or $(FUZZTIME),3000000x) ./provider/endpoint

# Benchmarks (not part of `make test`). First what a user waits for and a
# platform pays, through real Crossplane with our packages installed (root:
# pods get network namespaces): a new load balancer address to the advertised
# endpoint (LB_EVENTS events), apply to PeerRelayReady (APPLIES PeerRelays),
# the same beside the Tailscale operator's PeerRelay reconciler (SIDE_TRIALS
# trials of each apply of SIDE_REPLICAS replicas, then REST at rest), and SCALE_PEERRELAYS PeerRelays created at once, then
# STEADY of quiet.
# Then the parts: the function in process and over gRPC against
# function-patch-and-transform, the provider's ingress-to-config latency and
# the provider alone at scale. Results in .cache/bench, compared by benchstat.
BENCHTIME ?= 1s
BENCHCOUNT ?= 6
EVENTS ?= 200x
SCALE_RELAYS ?= 1000
LB_EVENTS ?= 100x
FAIR_EVENTS ?= 20x
APPLIES ?= 10x
SIDE_TRIALS ?= 20x
SIDE_REPLICAS ?= 1,10,30
REST ?= 15m
SCALE_PEERRELAYS ?= 10,100,300
STEADY ?= 5m
BENCH_OUT := $(CURDIR)/.cache/bench
# The benchmarks' floor: a function that replays a recorded response.
$(BIN)/function-replay: test/bench/replay/main.go go.mod go.sum
	@mkdir -p $(BIN)
	$(GO) build -ldflags "$(TOOL_LDFLAGS)" -o $@ ./test/bench/replay

bench: tools build xpkg $(BIN)/benchstat $(BIN)/function-replay
	@mkdir -p $(BENCH_OUT)
	@echo "cores: $$(nproc); $$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
	$(GO) test -run '^$$' -bench 'LBAddressToEndpoint' -benchtime $(LB_EVENTS) -count 1 -timeout 60m ./test/crossplane | tee $(BENCH_OUT)/system.txt
	$(GO) test -run '^$$' -bench 'ApplyToReady' -benchtime $(APPLIES) -count 1 -timeout 60m ./test/crossplane | tee -a $(BENCH_OUT)/system.txt
	SIDE_REPLICAS=$(SIDE_REPLICAS) REST=$(REST) $(GO) test -run '^$$' -bench 'SideBySide' -benchtime $(SIDE_TRIALS) -count 1 -timeout 90m ./test/crossplane | tee $(BENCH_OUT)/side-by-side.txt
	SCALE_PEERRELAYS=$(SCALE_PEERRELAYS) STEADY=$(STEADY) $(GO) test -run '^$$' -bench 'SystemScale' -benchtime 1x -count 1 -timeout 180m ./test/crossplane | tee $(BENCH_OUT)/system-scale.txt
	$(GO) test -run '^$$' -bench 'RunFunction|GRPC' -benchmem -benchtime $(BENCHTIME) -count $(BENCHCOUNT) ./test/bench | tee $(BENCH_OUT)/fn.txt
	$(GO) test -run '^$$' -bench 'IngressToConfig' -benchtime $(EVENTS) -count 1 ./test/bench | tee $(BENCH_OUT)/provider.txt
	SCALE_RELAYS=$(SCALE_RELAYS) $(GO) test -run '^$$' -bench 'Scale' -benchtime 1x -count 1 -timeout 30m ./test/bench | tee $(BENCH_OUT)/scale.txt
	$(GO) test -run '^$$' -bench 'ProbeFairness' -benchtime $(FAIR_EVENTS) -count 1 -timeout 15m ./test/e2e | tee $(BENCH_OUT)/fairness.txt
	$(BIN)/benchstat -filter '.name:RunFunction' $(BENCH_OUT)/fn.txt
	$(BIN)/benchstat -filter '.name:GRPC' -col /fn $(BENCH_OUT)/fn.txt

# govulncheck with the vulnerability database from the module proxy.
vulncheck: $(BIN)/govulncheck $(BIN)/indexdb
	bash hack/vulncheck.sh

clean:
	rm -rf .cache
