#!/usr/bin/env bash
# The Python binding's entry points (see bindings/python/README.md):
#   run.sh test         fresh venv, `pip install ./bindings/python` (maturin builds the wheel),
#                       pytest (all tests, conformance included), mypy.stubtest, sdist check
#   run.sh conformance  reinstall into the venv if needed, run tests/test_conformance.py only
#                       (an execute case once per helper flavour); ends with the plain line
#                       `N passed, N failed, N skipped`
#   run.sh bench        release build in its own venv; holdoff against pybreaker, tenacity,
#                       purgatory and aiobreaker (HOLDOFF_BENCH_OUT=<file>: JSON-lines records)
#   run.sh leak         the leak loops of tests/test_leak.py at full size (a million objects);
#                       `test` runs them at a tenth of the size
# The cargo build goes to "${CARGO_TARGET_DIR:-<repo>/target}" (shared with the workspace), the
# venvs live beside it.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
VENV="$CARGO_TARGET_DIR/py-venv"
BENCH_VENV="$CARGO_TARGET_DIR/py-bench-venv"
PY="${PYTHON:-python3}"
export PYTHONDONTWRITEBYTECODE=1
export PIP_DISABLE_PIP_VERSION_CHECK=1
PYTEST_FLAGS=(-p no:cacheprovider -q)

log() { printf '==> %s\n' "$*" >&2; }

ensure_tools() {
    if ! command -v "$PY" >/dev/null 2>&1 || ! "$PY" -c 'import venv, ensurepip' >/dev/null 2>&1; then
        if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
            log "installing python3, python3-venv, python3-pip (apt-get)"
            apt-get update -qq
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv python3-pip >/dev/null
            PY=python3
        else
            echo "python3 with the venv module is required" >&2
            exit 1
        fi
    fi
    if ! command -v cargo >/dev/null 2>&1; then
        echo "cargo (Rust) is required to build the extension" >&2
        exit 1
    fi
}

new_venv() { # dir
    rm -rf "$1"
    mkdir -p "$(dirname "$1")"
    "$PY" -m venv "$1"
}

# pip install ./bindings/python for real: pip runs maturin (PEP 517) in an isolated build
# environment; maturin builds the wheel with cargo into CARGO_TARGET_DIR. MATURIN_PEP517_ARGS
# picks the cargo profile (dev for tests, release for benchmarks).
install_pkg() { # venv profile
    log "pip install ./bindings/python ($2 profile)"
    (cd "$ROOT" && MATURIN_PEP517_ARGS="--profile $2" \
        "$1/bin/python" -m pip install -q --force-reinstall --no-deps ./bindings/python)
}

cmd_test() {
    ensure_tools
    log "fresh venv at $VENV"
    new_venv "$VENV"
    # requests and httpx: tests/test_client_timeouts.py checks their real timeout classes, the
    # execute cases' HTTP flavours return their responses, the README example calls requests.
    "$VENV/bin/python" -m pip install -q pytest mypy requests httpx
    install_pkg "$VENV" dev
    log "pytest"
    (cd "$HERE" && "$VENV/bin/python" -m pytest "${PYTEST_FLAGS[@]}" tests) > "$VENV/pytest.log" 2>&1 \
        && rc=0 || rc=$?
    log "mypy.stubtest holdoff._holdoff"
    (cd "$VENV" && "$VENV/bin/python" -m mypy.stubtest holdoff._holdoff \
        --allowlist "$HERE/tests/stubtest-allowlist.txt") && st=0 || st=$?
    log "mypy --strict over the package and the typed tests"
    (cd "$HERE/tests" && "$VENV/bin/python" -m mypy --strict --no-incremental --cache-dir=/dev/null \
        -p holdoff && "$VENV/bin/python" -m mypy --strict --no-incremental --cache-dir=/dev/null \
        test_typing.py) && ty=0 || ty=$?
    sdist_check && sd=0 || sd=$?
    # pytest's report last, so that its tally line ends the output.
    cat "$VENV/pytest.log"
    if [ "$rc" != 0 ] || [ "$st" != 0 ] || [ "$ty" != 0 ] || [ "$sd" != 0 ]; then
        echo "FAILED: pytest=$rc stubtest=$st mypy=$ty sdist=$sd" >&2
        exit 1
    fi
}

# The sdist must build the extension on a machine with only Rust and Python: build it, install
# it into a second venv, and run the smoke tests against that install.
sdist_check() {
    local dist="$CARGO_TARGET_DIR/py-sdist" venv="$CARGO_TARGET_DIR/py-sdist-venv"
    log "sdist: build and install"
    rm -rf "$dist"
    "$VENV/bin/python" -m pip install -q "maturin>=1.9.4,<2"
    (cd "$HERE" && "$VENV/bin/maturin" sdist -o "$dist") > "$dist.log" 2>&1 || { cat "$dist.log"; return 1; }
    new_venv "$venv"
    "$venv/bin/python" -m pip install -q pytest
    MATURIN_PEP517_ARGS="--profile dev" "$venv/bin/python" -m pip install -q "$dist"/holdoff-*.tar.gz
    (cd "$HERE" && "$venv/bin/python" -m pytest -p no:cacheprovider -q tests/test_smoke.py) >/dev/null
}

cmd_conformance() {
    ensure_tools
    # requests and httpx: the HTTP flavours of the execute cases return their real responses.
    if [ ! -x "$VENV/bin/python" ] \
        || ! "$VENV/bin/python" -c 'import pytest, requests, httpx' >/dev/null 2>&1; then
        new_venv "$VENV"
        "$VENV/bin/python" -m pip install -q pytest requests httpx
    fi
    install_pkg "$VENV" dev >&2
    cd "$HERE"
    exec "$VENV/bin/python" -m pytest "${PYTEST_FLAGS[@]}" tests/test_conformance.py
}

# About a minute on a busy 2-core machine: too slow for `test`.
cmd_leak() {
    ensure_tools
    if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import pytest' >/dev/null 2>&1; then
        new_venv "$VENV"
        "$VENV/bin/python" -m pip install -q pytest
    fi
    install_pkg "$VENV" dev >&2
    cd "$HERE"
    HOLDOFF_LEAK=full exec "$VENV/bin/python" -m pytest "${PYTEST_FLAGS[@]}" tests/test_leak.py
}

# The bench venv is kept while its requirement list is unchanged (the peers are unpinned: the
# records name the versions measured); the release build is reinstalled every run.
BENCH_REQS="pytest pytest-benchmark pybreaker tenacity purgatory aiobreaker"

cmd_bench() {
    ensure_tools
    if [ ! -x "$BENCH_VENV/bin/python" ] || [ "$(cat "$BENCH_VENV/.holdoff-reqs" 2>/dev/null)" != "$BENCH_REQS" ]; then
        log "fresh bench venv at $BENCH_VENV"
        new_venv "$BENCH_VENV"
        # shellcheck disable=SC2086
        "$BENCH_VENV/bin/python" -m pip install -q $BENCH_REQS
        echo "$BENCH_REQS" > "$BENCH_VENV/.holdoff-reqs"
    fi
    install_pkg "$BENCH_VENV" release
    cd "$HERE"
    local json="$CARGO_TARGET_DIR/py-bench.json" counter="$CARGO_TARGET_DIR/py-alloccount.so" preload=""
    "$BENCH_VENV/bin/python" -m pytest -p no:cacheprovider -q bench/bench_hot_path.py \
        --benchmark-only --benchmark-json="$json" \
        --benchmark-columns=min,median,max,ops --benchmark-sort=name
    "$BENCH_VENV/bin/python" bench/report.py "$json"
    # HOLDOFF_BENCH_OUT=<file>: records.py also appends the cross-language benchmark's JSON lines.
    log "records: timings, then memory and allocations"
    "$BENCH_VENV/bin/python" bench/records.py timings "$json"
    if command -v gcc >/dev/null 2>&1 && gcc -shared -fPIC -O2 -o "$counter" bench/alloccount.c; then
        preload="$counter"
    fi
    PYTHONMALLOC=malloc LD_PRELOAD="$preload" "$BENCH_VENV/bin/python" bench/records.py memory
}

case "${1:-test}" in
    test) cmd_test ;;
    conformance) cmd_conformance ;;
    bench) cmd_bench ;;
    leak) cmd_leak ;;
    *) echo "usage: $0 test|conformance|bench|leak" >&2; exit 2 ;;
esac
