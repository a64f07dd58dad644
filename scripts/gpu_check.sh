#!/usr/bin/env bash
# The GPU check: run once on a machine with an NVIDIA GPU.
#   bash scripts/gpu_check.sh                     # everything below, results under outputs/gpu_check/
#   PAIR=llama68m_llama2_7b LIMIT=4 bash scripts/gpu_check.sh
# 1. greedy identity with ar of every method preset (conf/method/) on the tiny pair on cuda;
# 2. a `-m method=...` sweep on a paper pair (PAIR, default qwen25_05b_14b) if its weights are in
#    the local Hugging Face cache (nothing is downloaded; skipped with a message otherwise);
# 3. the cost model's timing sanity on CUDA (scripts/gpu_check.py timing): an eval with
#    cost_model=true on the tiny pair (and on PAIR when step 2 ran);
# 4. eager vs CUDA-graph decode steps (scripts/gpu_graphs.py graphs): ar's ms per step with the
#    static cache eager, replayed (model.cuda_graphs=true) and dynamic, and greedy identity of the
#    replayed tokens with the eager ones, on the tiny pair and on GRAPH_PAIR (default smollm2);
# 5. float32 vs bfloat16 agreement of ar on GRAPH_PAIR (fraction of identical tokens, reported).
# Fails at once, saying so, on a machine without CUDA. Exit status: 0 when every step passed.
#   DEVICE=cpu bash scripts/gpu_check.sh        # dry run on the CPU: every step on the tiny pair
#   (GREEDY_METHODS="sps rrs_tree" MAX_NEW=8 shorten it); nothing in it needs a GPU
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python}
PAIR=${PAIR:-qwen25_05b_14b}
METHODS=${METHODS:-ar,sps,sps_heuristic,adaedl,pearl,hsd,rrs,rrs_tree,hsd_tree}
BENCH=${BENCH:-tiny}
LIMIT=${LIMIT:-8}
DTYPE=${DTYPE:-bfloat16}
ATTN=${ATTN:-sdpa}   # flash_attention_2 with the [gpu] extra: tree methods switch to sdpa (logged)
DEVICE=${DEVICE:-cuda}
GRAPH_PAIR=${GRAPH_PAIR:-$([ "$DEVICE" = cpu ] && echo tiny || echo smollm2)}
GREEDY_METHODS=${GREEDY_METHODS:-}   # empty: every conf/method preset
MAX_NEW=${MAX_NEW:-24}
OUT=${OUT:-outputs/gpu_check/$(date +%Y%m%d-%H%M%S)}
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=offline PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH}

if ! $PY -c "import torch" 2>/dev/null; then
  echo "gpu_check: '$PY' cannot import torch; set PY=<the project's python> (e.g. .venv/bin/python)" >&2
  exit 1
fi
if [ "$DEVICE" != cpu ] && ! $PY -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "gpu_check: CUDA is not available here (torch.cuda.is_available() is False: no NVIDIA GPU," \
       "no driver, or a CPU-only torch build); run it on a GPU machine with a CUDA build of torch" >&2
  exit 1
fi
mkdir -p "$OUT"
failed=()
if [ "$DEVICE" = cpu ]; then
  echo "gpu_check: dry run on the CPU (DEVICE=cpu): the GPU-only parts (capture, syncs) do not run" \
    | tee "$OUT/versions.txt"
else
  $PY -c "import torch; from specdec.models.gpu import gpu_versions; \
print('gpu_check:', torch.cuda.get_device_name(0), 'x', torch.cuda.device_count(), gpu_versions())" \
    | tee "$OUT/versions.txt"
fi

echo "== 1. greedy identity of every method preset on the tiny pair ($DEVICE, float64)"
# shellcheck disable=SC2086  # GREEDY_METHODS is a list of words
$PY scripts/gpu_check.py greedy --device "$DEVICE" ${GREEDY_METHODS:+--methods $GREEDY_METHODS} \
  --max-new-tokens "$MAX_NEW" 2>&1 | tee "$OUT/greedy.txt" || failed+=(greedy)

echo "== 3a. cost-model timing sanity on $DEVICE (tiny pair, sps)"
$PY -m specdec.eval model=tiny benchmark=tiny method=sps "device=$DEVICE" cost_model=true \
  progress=false hydra.mode=RUN "hydra.run.dir=$OUT/timing_tiny" "paths.output_dir=$OUT/timing_tiny" \
  2>&1 | tail -5
$PY scripts/gpu_check.py timing "$OUT/timing_tiny" --allow-nonmonotone 2>&1 | tee "$OUT/timing_tiny.txt" \
  || failed+=(timing_tiny)

echo "== 4. eager vs CUDA-graph decode steps of ar (the tiny pair, and GRAPH_PAIR=$GRAPH_PAIR)"
$PY scripts/gpu_graphs.py graphs --pair tiny --device "$DEVICE" --max-new-tokens "$MAX_NEW" 2>&1 \
  | tee "$OUT/graphs_tiny.txt" || failed+=(graphs_tiny)
if [ "$GRAPH_PAIR" != tiny ]; then
  $PY scripts/gpu_graphs.py graphs --pair "$GRAPH_PAIR" --device "$DEVICE" --dtype "$DTYPE" \
    --max-new-tokens "$MAX_NEW" 2>&1 | tee "$OUT/graphs_pair.txt" || failed+=(graphs_pair)
fi

echo "== 5. float32 vs bfloat16 agreement of ar on $GRAPH_PAIR (reported, not asserted)"
$PY scripts/gpu_graphs.py dtypes --pair "$GRAPH_PAIR" --device "$DEVICE" --max-new-tokens "$MAX_NEW" \
  2>&1 | tee "$OUT/dtypes.txt" || failed+=(dtypes)

echo "== 2. method sweep on $PAIR (weights from the local cache only)"
if [ "$DEVICE" = cpu ]; then
  echo "gpu_check: dry run: skipping the $PAIR sweep"
elif $PY scripts/gpu_check.py weights --pair "$PAIR"; then
  $PY -m specdec.eval -m "method=$METHODS" "model=$PAIR" "benchmark=$BENCH" "limit=$LIMIT" \
    device=cuda "model.placement.dtype=$DTYPE" "model.placement.attn_implementation=$ATTN" \
    "paths.log_dir=$OUT/sweep" progress=false 2>&1 | tee "$OUT/sweep.txt" || failed+=(sweep)
  echo "== 3b. cost-model timing sanity on CUDA ($PAIR, sps)"
  sps_dir=$(dirname "$(find "$OUT/sweep" -path '*/sps/*summary.json' -print -quit 2>/dev/null)")
  if [ -n "$sps_dir" ] && [ -f "$sps_dir/summary.json" ]; then
    $PY scripts/gpu_check.py timing "$sps_dir" --min-ratio 0.5 2>&1 | tee "$OUT/timing_pair.txt" \
      || failed+=(timing_pair)
  else
    echo "gpu_check: no sps run folder under $OUT/sweep"; failed+=(timing_pair)
  fi
else
  echo "gpu_check: skipping the $PAIR sweep (download its weights first, or PAIR=<pair in conf/model>)"
fi

if [ ${#failed[@]} -gt 0 ]; then
  echo "gpu_check: FAILED: ${failed[*]} (outputs in $OUT)"
  exit 1
fi
echo "gpu_check: all checks passed (outputs in $OUT)"
