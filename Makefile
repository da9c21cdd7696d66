# holdoff: the two commands a newcomer needs are `make demo` and `make test`.
SHELL := /bin/bash
export CARGO_TARGET_DIR ?= $(CURDIR)/target
export CARGO_TERM_COLOR ?= never
BINDINGS := python node c go csharp kotlin

.PHONY: test deps demo conformance lint rust loom bindings bench miri leak fuzz $(addprefix test-,$(BINDINGS))

## test: the system packages, format and lint checks, every Rust test and the loom models, every
## binding's tests (stress tests, sanitizers and leak loops included), then the conformance
## matrix. The bindings' tests run their conformance runners and leave the tallies in
## HOLDOFF_TALLY_DIR, where the matrix reads them instead of running each runner again.
test: export HOLDOFF_TALLY_DIR := $(CARGO_TARGET_DIR)/conformance-tallies
test:
	@rm -rf "$$HOLDOFF_TALLY_DIR"
	@$(MAKE) --no-print-directory deps lint rust loom bindings conformance

## deps: the Debian packages every language needs, installed when missing (scripts/install-deps).
deps:
	@bash scripts/install-deps

lint:
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings
	python3 conformance/validate.py

# The pyo3 and napi crates link against their interpreter only when loaded by it; they are
# tested through Python and Node below, not as Rust test binaries. conformance/run-all's rust row
# selects the same packages, so that it builds nothing again.
RUST_TESTED := --workspace --exclude holdoff-python --exclude holdoff-node

rust:
	cargo test $(RUST_TESTED) --all-targets
	cargo test $(RUST_TESTED) --doc
	RUSTDOCFLAGS="-D warnings" cargo doc --no-deps -p holdoff -p holdoff-tokio -p holdoff-otel --all-features
	# Built first so that the time limit bounds the run, not the build on a busy machine.
	cargo build -q -p holdoff-tokio --example local_server --features reqwest
	timeout 60 cargo run -q -p holdoff-tokio --example local_server --features reqwest

## loom: model-check the core's lock-free paths, every interleaving of 2-3 threads (core/loom.sh).
loom:
	bash core/loom.sh

## miri: Miri (nightly, installed by the script) over the core's tests and the C ABI's Rust tests.
miri:
	bash core/miri.sh

## fuzz: every cargo-fuzz target for FUZZ_SECONDS (default 60) each, saved crashes replayed first
## (nightly and cargo-fuzz installed by the script; not part of make test).
fuzz:
	bash fuzz/run.sh

## leak: the Python and Node leak loops at full size, a million objects each with flat memory
## (make test runs them at a tenth of the size).
leak:
	bash bindings/python/run.sh leak
	bash bindings/node/run.sh leak

bindings: $(addprefix test-,$(BINDINGS))

$(addprefix test-,$(BINDINGS)): test-%:
	bash bindings/$*/run.sh test

## conformance: every language's runner over conformance/cases, one summary line per language.
conformance:
	@bash conformance/run-all

## demo: the simulator on the bundled incident scenarios (charts under target/demo/).
demo:
	@bash cli/demo.sh

## bench: the cross-language benchmark (bench/run): one release build, then Rust, Python, Node,
## Go, C, C# and Kotlin (bench/<lang>/) against their peers; writes bench/results/ and the tables of
## docs/performance.md.
bench:
	@bash bench/run

## dist: every language's installable artifacts under dist/ (make dist-<lang> for one).
.PHONY: dist
dist: dist-c dist-go dist-python dist-node dist-rust dist-kotlin dist-csharp

## dist-c: dist/c/holdoff-<version>-<target>.tar.gz for this machine (and aarch64 when Debian's
## gcc-aarch64-linux-gnu is installed): header, stripped static and shared libraries (with a
## soname), pkg-config file. install: the same files under $(DESTDIR)$(PREFIX).
PREFIX ?= /usr/local
.PHONY: dist-c install
dist-c:
	bash bindings/c/run.sh dist
install:
	bash bindings/c/run.sh install "$(PREFIX)"

## dist-go: dist/go/, a Go module proxy directory (GOPROXY=file://...) serving holdoff.dev/go
## with the header and the release static libraries inside the module.
.PHONY: dist-go
dist-go: dist-c
	bash bindings/go/run.sh dist

## dist-python: dist/python/, abi3 wheels (CPython 3.9+) for manylinux2014 x86_64 and aarch64,
## built with maturin and zig, and the sdist (which stops at once, saying so, without Rust).
.PHONY: dist-python
dist-python:
	bash bindings/python/run.sh dist

## dist-node: dist/node/, `npm pack` tarballs in the napi-rs layout: holdoff (the JavaScript API
## and the loader, no addon, no install script) and holdoff-linux-{x64,arm64}-gnu and
## holdoff-linux-x64-musl, each holding its release addon (linked with zig and cargo-zigbuild;
## the glibc ones against glibc 2.17).
.PHONY: dist-node
dist-node:
	bash bindings/node/run.sh dist

## dist-rust: dist/rust/, the crates holdoff, holdoff-tokio, holdoff-otel and holdoff-cli as `cargo package`
## writes them (.crate files; scripts/dist-check/rust.sh runs the publish dry runs and builds them).
.PHONY: dist-rust
dist-rust:
	cargo package --quiet --allow-dirty --no-verify -p holdoff -p holdoff-tokio -p holdoff-otel -p holdoff-cli
	@mkdir -p dist/rust && v=$$(sed -nE 's/^version = "([^"]+)"/\1/p' Cargo.toml | head -n1) && \
	  for c in holdoff holdoff-tokio holdoff-otel holdoff-cli; do cp "$(CARGO_TARGET_DIR)/package/$$c-$$v.crate" dist/rust/; done && \
	  ls -l dist/rust

## dist-kotlin: dist/maven/, a Maven file repository holding dev.holdoff:holdoff, a jar carrying
## the native library for linux-x86-64 and linux-aarch64 (cross-built with Debian's
## gcc-aarch64-linux-gnu).
.PHONY: dist-kotlin
dist-kotlin:
	bash bindings/kotlin/run.sh dist

## dist-csharp: dist/nuget/Holdoff.<version>.nupkg, packed with Debian's nuget: Holdoff.dll
## (netstandard2.0, built with Mono's mcs) and runtimes/linux-{x64,arm64}/native/libholdoff.so
## from the C archives (scripts/dist-check/csharp.sh installs it from that folder feed).
.PHONY: dist-csharp
dist-csharp: dist-c
	bash bindings/csharp/run.sh dist
