#!/usr/bin/env bash
# bench/python: holdoff's Python binding (release build, in a venv of its own) against
# pybreaker, tenacity, purgatory and aiobreaker, in one pytest-benchmark run
# (bench_hot_path.py), then memory and allocations (records.py). Prints the tables;
# HOLDOFF_BENCH_OUT=<file> also appends the records.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"
export PYTHONDONTWRITEBYTECODE=1 PIP_DISABLE_PIP_VERSION_CHECK=1

PY="${PYTHON:-python3}"
need "$PY" python
venv="$CARGO_TARGET_DIR/py-bench-venv"
here="$BENCH/python"
# The venv is kept while this list is unchanged (the peers are unpinned: the records name the
# versions measured); the binding is reinstalled every run.
reqs="pytest pytest-benchmark pybreaker tenacity purgatory aiobreaker"
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$venv/.holdoff-reqs" 2>/dev/null)" != "$reqs" ]; then
  bench_log "python: fresh venv at $venv"
  rm -rf "$venv"
  "$PY" -m venv "$venv"
  # shellcheck disable=SC2086
  "$venv/bin/python" -m pip install -q $reqs
  echo "$reqs" >"$venv/.holdoff-reqs"
fi
# pip runs maturin, which builds the extension with cargo in the chosen profile (cargo calls
# the debug profile "dev").
cargo_profile="$PROFILE"
[ "$PROFILE" = debug ] && cargo_profile=dev
(cd "$ROOT" && MATURIN_PEP517_ARGS="--profile $cargo_profile" \
  "$venv/bin/python" -m pip install -q --force-reinstall --no-deps ./bindings/python)

cd "$here"
json="$BENCH_OUT_DIR/py-bench.json"
"$venv/bin/python" -m pytest -p no:cacheprovider -q bench_hot_path.py \
  --benchmark-only --benchmark-json="$json" \
  --benchmark-columns=min,median,max,ops --benchmark-sort=name
"$venv/bin/python" report.py "$json"
bench_log "python: records (timings, then memory and allocations)"
"$venv/bin/python" records.py timings "$json"
# Every allocation, Python's and the extension's, goes through malloc, where alloccount.so
# (when gcc can build it) counts them.
preload=""
counter="$BENCH_OUT_DIR/py-alloccount.so"
if command -v gcc >/dev/null && gcc -shared -fPIC -O2 -o "$counter" alloccount.c; then
  preload="$counter"
fi
PYTHONMALLOC=malloc LD_PRELOAD="$preload" exec "$venv/bin/python" records.py memory
