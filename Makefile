# weft — two commands on a fresh Debian machine with Go:
#   make demo   install what is missing, build, run the main demo
#   make test   install what the tests need, run the whole suite
GO        ?= go
BIN       := $(CURDIR)/bin
NP        ?= 4
PROVIDER  ?= shm
export CGO_ENABLED := 1

.PHONY: demo test deps test-deps build vet bench clean

deps:
	@deploy/install-deps.sh build

test-deps:
	@deploy/install-deps.sh test

build: deps
	$(GO) build -o $(BIN)/ ./cmd/... ./examples/...

demo: build
	$(BIN)/fabrun -n $(NP) --provider $(PROVIDER) --tag-output $(BIN)/hello

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }

test: test-deps vet
	$(GO) test -count=1 -timeout 12m ./...

bench: deps
	$(GO) test -run '^$$' -bench . -benchtime 200ms ./...

clean:
	rm -rf $(BIN)
