#!/usr/bin/env bash
# The Python binding's entry points (see bindings/python/README.md):
#   run.sh test         fresh venv, `pip install ./bindings/python` (maturin builds the wheel),
#                       ruff, pytest (the conformance runner, then every other test, the
#                       metrics exporters against opentelemetry-sdk and prometheus_client),
#                       mypy.stubtest, mypy --strict (configured in pyproject.toml), sdist check,
#                       the multi-process fleet test (conformance/fleet/run.py, a real redis-server)
#   run.sh conformance  reinstall into the venv if needed, run tests/test_conformance.py only
#                       (an execute case once per helper flavour)
#   run.sh leak         the leak loops of tests/test_leak.py at full size (a million objects);
#                       `test` runs them at a tenth of the size
#   run.sh dist         the wheels (abi3, manylinux x86_64 and aarch64) and the sdist, into
#                       dist/python/ (make dist-python)
# Needs python3 with venv (scripts/install-deps python). The cargo build goes to the shared
# target dir, the venvs live beside it.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh" python

VENV="$CARGO_TARGET_DIR/py-venv"
PY="${PYTHON:-python3}"
export PYTHONDONTWRITEBYTECODE=1
export PIP_DISABLE_PIP_VERSION_CHECK=1
PYTEST=("$VENV/bin/python" -m pytest -p no:cacheprovider -q)

new_venv() { # dir
  rm -rf "$1"
  mkdir -p "$(dirname "$1")"
  "$PY" -m venv "$1"
}

# The test venv, kept when it already has the modules named (conformance, leak).
reuse_venv() { # modules
  local modules="$*"
  if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import ${modules// /, }" >/dev/null 2>&1; then
    new_venv "$VENV"
    "$VENV/bin/python" -m pip install -q "$@"
  fi
}

# pip install ./bindings/python for real: pip runs maturin (PEP 517) in an isolated build
# environment; maturin builds the wheel with cargo into CARGO_TARGET_DIR (dev profile).
install_pkg() { # venv
  log "pip install ./bindings/python (dev profile)"
  (cd "$ROOT" && MATURIN_PEP517_ARGS="--profile dev" \
    "$1/bin/python" -m pip install -q --force-reinstall --no-deps ./bindings/python) >&2
}

cmd_test() {
  local rc st ty sd cf lint fl
  log "fresh venv at $VENV"
  new_venv "$VENV"
  # requests and httpx: tests/test_client_timeouts.py checks their real timeout classes, the
  # execute cases' HTTP flavours return their responses, the README example calls requests.
  # The extras' packages (holdoff[otel], holdoff[prometheus]) and the OpenTelemetry SDK: the
  # exporter tests collect with the real SDK and scrape a real prometheus_client server, and
  # mypy checks holdoff.otel and holdoff.prometheus against their types.
  "$VENV/bin/python" -m pip install -q pytest mypy ruff requests httpx \
    opentelemetry-api opentelemetry-sdk prometheus_client
  install_pkg "$VENV"
  cd "$HERE"
  log "pytest: the conformance runner"
  run_conformance "${PYTEST[@]}" tests/test_conformance.py && cf=0 || cf=$?
  log "pytest: every other test"
  "${PYTEST[@]}" tests --ignore=tests/test_conformance.py >"$VENV/pytest.log" 2>&1 && rc=0 || rc=$?
  log "mypy.stubtest holdoff._holdoff"
  (cd "$VENV" && "$VENV/bin/python" -m mypy.stubtest holdoff._holdoff \
    --allowlist "$HERE/tests/stubtest-allowlist.txt") && st=0 || st=$?
  log "mypy --strict over the package and the typed tests"
  "$VENV/bin/python" -m mypy --no-incremental --cache-dir=/dev/null && ty=0 || ty=$?
  log "ruff: lint and format"
  "$VENV/bin/ruff" check --no-cache . && "$VENV/bin/ruff" format --check --no-cache . \
    && lint=0 || lint=$?
  sdist_check && sd=0 || sd=$?
  log "the multi-process fleet test (conformance/fleet/README.md)"
  "$VENV/bin/python" "$ROOT/conformance/fleet/run.py" python \
    -- "$VENV/bin/python" "$ROOT/conformance/fleet/worker.py" && fl=0 || fl=$?
  # pytest's report last, so that its tally line ends the output of the tests.
  cat "$VENV/pytest.log"
  if [ "$cf" != 0 ] || [ "$rc" != 0 ] || [ "$st" != 0 ] || [ "$ty" != 0 ] || [ "$lint" != 0 ] \
    || [ "$sd" != 0 ] || [ "$fl" != 0 ]; then
    log "FAILED: conformance=$cf pytest=$rc stubtest=$st mypy=$ty ruff=$lint sdist=$sd fleet=$fl"
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
  (cd "$HERE" && "$VENV/bin/maturin" sdist -o "$dist") >"$dist.log" 2>&1 || { cat "$dist.log"; return 1; }
  new_venv "$venv"
  "$venv/bin/python" -m pip install -q pytest
  MATURIN_PEP517_ARGS="--profile dev" "$venv/bin/python" -m pip install -q "$dist"/holdoff-*.tar.gz
  (cd "$HERE" && "$venv/bin/python" -m pytest -p no:cacheprovider -q tests/test_smoke.py) >/dev/null
}

cmd_conformance() {
  # requests and httpx: the HTTP flavours of the execute cases return their real responses.
  reuse_venv pytest requests httpx
  install_pkg "$VENV"
  cd "$HERE"
  run_conformance "${PYTEST[@]}" tests/test_conformance.py
}

# About a minute on a busy 2-core machine: too slow for `test`.
cmd_leak() {
  reuse_venv pytest
  install_pkg "$VENV"
  cd "$HERE"
  HOLDOFF_LEAK=full "${PYTEST[@]}" tests/test_leak.py
}

# The artifacts users install, into dist/python/ (make dist-python): one abi3 wheel (CPython
# 3.9+) per platform, manylinux2014 x86_64 and aarch64, and the sdist (building it needs Rust;
# backend/holdoff_backend.py stops at once without it). maturin builds both wheels with zig
# (PyPI's ziglang) as the linker against glibc 2.17, so that an index accepts the manylinux tags;
# auditwheel checks each tag. The pinned tools live in a venv beside the shared target dir; the
# builds go to CARGO_TARGET_DIR/<target>/release. scripts/dist-check/python.sh tests the result.
cmd_dist() {
  local DIST="$ROOT/dist/python" TOOLS="$CARGO_TARGET_DIR/py-dist-venv" have pin arch wheel out
  local PINS=(maturin==1.16.0 ziglang==0.17.1 auditwheel==6.8.2) TARGETS=(x86_64 aarch64)

  have="$("$TOOLS/bin/python" -m pip freeze 2>/dev/null || true)"
  for pin in "${PINS[@]}"; do
    if ! grep -qx "$pin" <<<"$have"; then
      log "tools venv at $TOOLS: ${PINS[*]}"
      rm -rf "$TOOLS"
      "$PY" -m venv "$TOOLS"
      "$TOOLS/bin/python" -m pip install -q "${PINS[@]}"
      break
    fi
  done
  export PATH="$TOOLS/bin:$PATH"
  for arch in "${TARGETS[@]}"; do
    rustup target list --installed 2>/dev/null | grep -qx "$arch-unknown-linux-gnu" \
      || rustup target add "$arch-unknown-linux-gnu"
  done

  rm -rf "$DIST"
  mkdir -p "$DIST"
  cd "$HERE"
  for arch in "${TARGETS[@]}"; do
    log "wheel for $arch (maturin --zig, manylinux2014, release)"
    maturin build --quiet --release --strip --zig --target "$arch-unknown-linux-gnu" \
      --compatibility manylinux2014 --interpreter "$TOOLS/bin/python" --out "$DIST"
  done
  log "sdist"
  temp out
  maturin sdist --out "$DIST" >"$out" 2>&1 || { cat "$out" >&2; exit 1; }

  # Each wheel: abi3 for CPython 3.9+, and manylinux_2_17 for its platform in auditwheel's eyes.
  for arch in "${TARGETS[@]}"; do
    wheel=("$DIST"/holdoff-*-cp39-abi3-manylinux2014_"$arch".manylinux_2_17_"$arch".whl)
    [ -f "${wheel[0]}" ] || { log "no abi3 manylinux wheel for $arch in $DIST"; ls "$DIST" >&2; exit 1; }
    if ! auditwheel show "${wheel[0]}" | tr -s ' \n' ' ' \
      | grep -q "consistent with the following platform tag: \"manylinux_2_17_$arch\""; then
      auditwheel show "${wheel[0]}" >&2
      log "auditwheel: ${wheel[0]##*/} is not manylinux_2_17_$arch"
      exit 1
    fi
  done
  ls -l "$DIST" | awk 'NR > 1 {printf "%8.0f KiB  %s\n", $5 / 1024, $9}'
}

run_mode "$@"
