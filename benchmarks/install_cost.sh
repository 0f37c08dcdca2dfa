#!/usr/bin/env bash
# What installing the project and each extra costs: for each, a fresh
# virtual environment, `pip install .`, then the extra; prints the seconds
# the extra's install took and the megabytes it added to the environment.
# Usage: benchmarks/install_cost.sh [OUTPUT]   (default: stdout)
# Times depend on the package index and its cache; sizes do not.
set -u
SRC="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${1:-/dev/stdout}"
: > "$OUT.tmp" 2>/dev/null || OUT=/dev/stdout
for target in base test doc distributed array-api serving benchmark \
    "test,doc,distributed,array-api" "torch==2.13.0" torch; do
  dir=$(mktemp -d)
  python3 -m venv "$dir/venv"
  # shellcheck disable=SC1091
  source "$dir/venv/bin/activate"
  pip install --quiet --upgrade pip >/dev/null 2>&1
  start=$(date +%s.%N)
  pip install --quiet "$SRC" >/dev/null 2>&1
  base_seconds=$(python -c "import time; print(round(time.time() - $start, 1))")
  base_mb=$(du -sm "$dir/venv" | cut -f1)
  start=$(date +%s.%N)
  case $target in
    base) rc=0 ;;
    torch*) pip install --quiet "$target" >/dev/null 2>&1; rc=$? ;;
    *) pip install --quiet "$SRC[$target]" >/dev/null 2>&1; rc=$? ;;
  esac
  seconds=$(python -c "import time; print(round(time.time() - $start, 1))")
  [ "$target" = base ] && seconds=$base_seconds
  mb=$(du -sm "$dir/venv" | cut -f1)
  torch=$(python -c "import torch; print(torch.__version__)" 2>/dev/null || echo none)
  echo "$target rc=$rc seconds=$seconds venv_MB=$mb added_MB=$((mb - base_mb)) torch=$torch" >> "$OUT"
  deactivate
  rm -rf "$dir"
done
rm -f "$OUT.tmp"
