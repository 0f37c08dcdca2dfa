#!/usr/bin/env bash
# The one prepared script of a session on the project's device machine
# (16 cores; numpy, scipy and scikit-learn installed, no internet): issue
# 19's thread scaling.  Writes everything under $OUT, within CORES_LIMIT
# seconds; the benchmark appends its results to progress.jsonl as they
# come, and writes its run record (results.json, "run") and its history
# line (history.jsonl) beside them: copy the files into
# benchmarks/results/scaling/... and append the line to
# benchmarks/results/scaling/history.jsonl.  (The GPU benchmark that ran
# first was removed with issue 50: doc/design/gpus.rst.)
#
#   OUT=/tmp/out bash benchmarks/device_session.sh
#   OUT=/tmp/out WM_COMPARE= bash benchmarks/device_session.sh
set -u
OUT=${OUT:?set OUT}
export PYTHONPATH=$PWD:$PWD/benchmarks${PYTHONPATH:+:$PYTHONPATH}
{
  date -u; nproc; free -g | head -2
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
  python -c "import numpy, scipy, sklearn; print(numpy.__version__, scipy.__version__, sklearn.__version__)"
  python -c "import numpy, threadpoolctl, json; print(json.dumps(threadpoolctl.threadpool_info()))"
  python -c "from sklearn_dof import _blas; print('in-place syrk without the GIL:', _blas.releases_gil())"
  git log -1 --format='%H %s' 2>/dev/null || true
} > "$OUT/machine.txt" 2>&1

# WM_COMPARE (MiB, 4096 unless set empty): also the largest thread count
# under that working_memory.
WM=${WM_COMPARE-4096}
WM_ARGS=()
[ -n "$WM" ] && WM_ARGS=(--compare-working-memory "$WM")
timeout -k 5 "${CORES_LIMIT:-360}" python benchmarks/bench_scaling.py --parts cores \
  --core-counts 1,2,4,8,16 --aux-counts 1,4,16 "${WM_ARGS[@]}" \
  --output-dir "$OUT/cores" > "$OUT/cores.log" 2>&1
echo "cores rc=$?" >> "$OUT/machine.txt"
tail -n 5 "$OUT"/*.log
