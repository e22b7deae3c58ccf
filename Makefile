# hepcache: `make demo` runs the proxy on an embedded default, `make test` runs the tests.
GO      ?= go
BIN     := bin/hepcache
PKGS    := ./...
# Packages: version from the newest tag (0.1.0 before the first) plus the commit.
VERSION  ?= $(shell (git describe --tags --abbrev=0 2>/dev/null || echo v0.1.0) | sed 's/^v//')$(shell git rev-parse --short HEAD >/dev/null 2>&1 && echo +git$$(git rev-parse --short HEAD))
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
ARCH     ?= $(shell $(GO) env GOARCH)
LDFLAGS  := -s -w -X github.com/hepcache/hepcache/internal/buildinfo.Version=$(VERSION) -X github.com/hepcache/hepcache/internal/buildinfo.Revision=$(REVISION)
NFPM     := $(GO) run github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2

.PHONY: all build man demo test unit interop bench lint clean fuzz deb rpm packages

all: build

# build makes a static binary (no cgo: it runs on any Linux of its arch).
# -buildvcs=auto stamps the commit, its time and whether the tree was
# modified (hepcache version) even where GOFLAGS turns stamping off.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=auto -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/hepcache

# man writes the man pages (packaging/man/*.1) from the commands' own -h.
man: build
	rm -rf packaging/man
	./$(BIN) help --man packaging/man

# deb and rpm package the static binary with the systemd unit, the default
# /etc/hepcache/hepcache.toml, logrotate, the man pages and the Grafana
# dashboard (packaging/).
deb: build man
	mkdir -p dist
	VERSION=$(VERSION) ARCH=$(ARCH) $(NFPM) pkg --packager deb --config packaging/nfpm.yaml --target dist/

rpm: build man
	mkdir -p dist
	VERSION=$(VERSION) ARCH=$(ARCH) $(NFPM) pkg --packager rpm --config packaging/nfpm.yaml --target dist/

packages: deb rpm

demo: build
	./$(BIN) demo

# test installs what is missing (.ci/install: Debian and PyPI packages, the S3
# server; quick when all is there), then runs unit tests and the interop tests
# that drive the real XRootD clients, Python bindings and uproot against a real
# C++ xrootd origin on loopback. SKIP_INSTALL=1 skips the installer.
test: build
	[ -n "$(SKIP_INSTALL)" ] || GO=$(GO) .ci/install
	$(GO) vet $(PKGS)
	HEPCACHE_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 40m $(PKGS)
	GO=$(GO) .ci/fuzz

# fuzz runs every fuzz target briefly from its seed corpus (FUZZTIME=100000x executions each).
fuzz:
	GO=$(GO) .ci/fuzz

unit:
	$(GO) test -short -count=1 $(PKGS)

bench: build
	./$(BIN) bench throughput

clean:
	rm -rf bin dist results demo-out packaging/man
