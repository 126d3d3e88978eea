# bookingledger — the commands a newcomer needs. See README.md.
SHELL := /bin/bash
GO ?= go

.PHONY: run rebuild test lint bench build fuzz clean-pg schema

## run: private PostgreSQL in .pgdata, migrations, `bookingledger serve` (webhooks :8080, admin 127.0.0.1:8081) with demo secrets
run: build
	@scripts/run.sh

## rebuild: `bookingledger rebuild` on the `make run` cluster (started for it when make run is not running)
rebuild: build
	@scripts/run.sh rebuild

## test: private throwaway PostgreSQL, gofmt + go vet + lint, go test -race ./..., brief fuzzing
test:
	@scripts/test.sh

## lint: gofmt, go vet, the import rules of the doc.go files, and one owner per table (scripts/ownercheck)
lint:
	@scripts/lint.sh

## schema: regenerate adapters/postgres/schema.sql from the migrations (after adding one)
schema:
	@scripts/schema.sh

## bench: benchmarks against a private durable PostgreSQL; figures go to docs/benchmarks.md
bench:
	@scripts/bench.sh

## fuzz: run every fuzz target for FUZZTIME (default 10s) each
fuzz:
	@FUZZTIME=$${FUZZTIME:-10s} scripts/fuzz.sh

# The revision is stamped with -ldflags -X: Go's own VCS stamping is off where GOFLAGS=-buildvcs=false
# is set (some CI images, this machine's go env) and finds no repository in a git worktree. Empty
# outside a git checkout; "+modified" when the tree has uncommitted changes.
REVISION := $(shell git rev-parse HEAD 2>/dev/null)$(shell git status --porcelain 2>/dev/null | grep -q . && echo +modified)

# BIN is where build writes the binary and BUILDFLAGS are further go build flags: cmd/bookingledger's
# tests build into a temporary directory, with -race when they run under -race.
BIN ?= bin/bookingledger
BUILDFLAGS ?=

build:
	@mkdir -p $(dir $(BIN))
	$(GO) build $(BUILDFLAGS) -ldflags "-X main.buildRevision=$(REVISION)" -o $(BIN) ./cmd/bookingledger

## clean-pg: stop the `make run` cluster and delete its data
clean-pg:
	@scripts/pg.sh stop .pgdata; rm -rf .pgdata
