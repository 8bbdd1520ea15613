#!/usr/bin/env bash
# The GPU checks of docs/performance.md, as one script for a GPU machine lent for a few minutes:
# the heaviest and most wanted first, each under its own time limit, every output kept.
#
#   bash benchmarks/gpu_check.sh [OUT]     # OUT: where the logs and JSON files go (default gpu-check)
#
# Order: the CUDA tests; one SVI step with and without CUDA graphs, and whether the graphs train as
# the plain compiled loss does from one seed (cuda_graphs); prediction
# T x N at the chunk rule's choice and at one chunk (predictive); the UCI and wide-net SVI steps of
# every path but the compiled ones against raw (svi_step --quick --no-compile); the two layouts of
# a product with few outputs (skinny_product); the draws that share a pass (shared_pass: LeNet);
# LeNet under K particles (conv_particles). At most 9.5 minutes at the limits below; a step that
# runs past its limit is cut and the next one starts.
set -u
OUT="${1:-gpu-check}"
mkdir -p "$OUT"
PY="${PYTHON:-python}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
"$PY" -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))" >> "$OUT/gpu.txt" 2>&1

step() {  # step NAME LIMIT_SECONDS COMMAND...
  local name="$1" limit="$2"
  shift 2
  echo "== $(date -Is) $name (limit ${limit} s)" | tee -a "$OUT/steps.txt"
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  echo "   rc=$?" | tee -a "$OUT/steps.txt"
}

step cuda-tests 90 "$PY" -m pytest -q -m cuda -p no:cacheprovider
step cuda-graphs 180 "$PY" benchmarks/cuda_graphs.py --device cuda
step predictive 90 "$PY" benchmarks/predictive.py --device cuda
step svi-step 90 "$PY" benchmarks/svi_step.py --device cuda --quick --no-compile
step skinny-product 30 "$PY" benchmarks/skinny_product.py --device cuda
step shared-pass 40 "$PY" benchmarks/shared_pass.py --device cuda
step conv-particles 45 "$PY" benchmarks/conv_particles.py --device cuda --quick
cp benchmarks/results/*cuda*.json "$OUT/" 2>/dev/null
echo "kept in $OUT: $(ls "$OUT" | tr '\n' ' ')"
