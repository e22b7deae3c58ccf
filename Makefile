# hepcache: `make demo` runs the proxy on an embedded default, `make test` runs the tests.
GO      ?= go
BIN     := bin/hepcache
PKGS    := ./...

.PHONY: all build demo test unit interop bench lint clean fuzz

all: build

build:
	$(GO) build -o $(BIN) ./cmd/hepcache

demo: build
	./$(BIN) demo

# test runs unit tests and the interop tests that drive the real XRootD clients,
# Python bindings and uproot against a real C++ xrootd origin on loopback.
test: build
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
	rm -rf bin results demo-out
