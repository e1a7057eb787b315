# Capstan's build targets. Every tool comes from go.mod (tool directives), so a
# fresh machine needs only Go.

GO        ?= go
BIN       ?= bin/capstan
K8S_VER   := $(shell $(GO) list -m -f '{{.Version}}' k8s.io/kubernetes)
K8S_MINOR := $(word 2,$(subst ., ,$(K8S_VER)))
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w \
	-X capstan.dev/capstan/internal/version.Version=$(VERSION) \
	-X k8s.io/component-base/version.gitVersion=$(K8S_VER) \
	-X k8s.io/component-base/version.gitMajor=1 \
	-X k8s.io/component-base/version.gitMinor=$(K8S_MINOR)

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
	$(GO) run ./hack/deploy

test: build
	CAPSTAN_BIN=$(abspath $(BIN)) $(GO) test -timeout 30m ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
