# Capstan's build targets. Every tool comes from go.mod (tool directives), so a
# fresh machine needs only Go.

GO        ?= go
BIN       ?= bin/capstan
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# The embedded Kubernetes reports its release from the binary's build
# information (internal/version), so no Kubernetes ldflags are needed.
LDFLAGS   := -s -w -X capstan.dev/capstan/internal/version.Version=$(VERSION)
# The manager image tag of config/deploy/capstan.yaml: the release tag, else
# the commit the manifests were generated at (never latest, never -dirty).
MANIFEST_VERSION ?= $(shell git describe --tags --always 2>/dev/null || echo dev)

.PHONY: all build up generate test lint

all: build

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/capstan

# The main job: build, start the embedded management plane (it detaches
# once ready) and bring the workload cluster "demo" up on the local provider.
up: build
	$(BIN) up --cluster demo

generate:
	$(GO) tool controller-gen object paths=./api/...
	$(GO) tool controller-gen crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(GO) run -ldflags '-X capstan.dev/capstan/internal/version.Version=$(MANIFEST_VERSION)' ./hack/deploy

# test/interop is a module of its own (upstream Cluster API's dependencies
# stay out of Capstan's): upstream clusterctl and an upstream provider,
# built from the Go module proxy, against this build of Capstan. It runs
# beside the main suite, its output held until the main suite's ends so the
# two do not interleave. test/e2e is named first so that it, the longest
# package, starts first; its tests that start planes of their own run
# E2E_PARALLEL at a time (test/e2e/doc.go). The QEMU provider's clusters
# boot emulated virtual machines that need the host's cores to themselves,
# so they run last, alone. Any part failing fails the target. -count=1: the
# tests run the capstan binary, which Go's test cache does not track, so a
# cached pass could be one of an older build.
E2E_PARALLEL ?= 3
QEMU_E2E     := ^TestQEMUCluster
test: build
	@interop=$$(mktemp -d); \
	(cd test/interop && CAPSTAN_BIN=$(abspath $(BIN)) $(GO) test -count=1 -timeout 40m ./... >$$interop/out 2>&1; echo $$? >$$interop/rc) & \
	CAPSTAN_BIN=$(abspath $(BIN)) $(GO) test -count=1 -timeout 60m -parallel $(E2E_PARALLEL) -skip '$(QEMU_E2E)' ./test/e2e/ ./...; main=$$?; \
	wait; echo "== test/interop"; cat $$interop/out; rc=$$(cat $$interop/rc); rm -rf $$interop; \
	echo "== test/e2e: QEMU clusters"; \
	CAPSTAN_BIN=$(abspath $(BIN)) $(GO) test -count=1 -timeout 60m -run '$(QEMU_E2E)' ./test/e2e/; qemu=$$?; \
	[ $$main -eq 0 ] && [ $$rc -eq 0 ] && [ $$qemu -eq 0 ]

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd test/interop && $(GO) vet ./...
