#!/usr/bin/env bash
# One short GPU session on a machine reached only through small transfers (<= 64 MiB per call,
# the machine warm for seconds between calls): three calls back to back, each carrying one part
# of what the SmolLM2 checks need and spending its run on what has arrived. Logs and small
# results of each phase come back as one $OUT/phaseN.tar.gz (the device returns <= 8 files).
#
#   here, once:  bash scripts/gpu_session.sh pack
#       wheels the image lacks into .whl/ (download them with network first: docs/gpu.md),
#       .ship/ = train_data.tar.gz + the 94 MiB GGUF as 2 parts.
#       Move specdec/assets/*/smollm2 out of the tree for calls 1 and 2 (75 MB: the tree must stay
#       < 64 MiB); put eagle3, specblock, hrad, specdecpp back for call 3 (draft_lm stays out:
#       every SmolLM2 step here runs with model.draft=none).
# What a call carries is there during that call only (the next call's carry replaces it, seen on
# an H200 on 2026-11-27); what a command writes under outputs/ stays while the machine is warm.
# So each phase first copies .ship/* into $WORK/ship, where the GGUF parts accumulate.
#   call 1  carry .whl .ship/train_data.tar.gz .ship/gguf.sha256 .ship/gguf.part00
#           bash scripts/gpu_session.sh 1   # setup; scripts/gpu_check.sh on the tiny pair
#   call 2  carry .ship/gguf.part01
#           bash scripts/gpu_session.sh 2   # GGUF joined + converted; eager vs graphs, fp32 vs
#                                           # bf16 of ar on SmolLM2
#   call 3  (assets in the tree)
#           bash scripts/gpu_session.sh 3   # greedy identity of the asset presets on SmolLM2
#                                           # (graphs); the EAGLE-3 recipe: data, a fit
#                                           # warm-started from the shipped head, and the tree
#                                           # sweep (ar, trees, pld, eagle3_pld; graphs) on
#                                           # held-out training prompts
# The two-call variant (a short budget; no training, no SpecBlock asset): pack with
# `--part-mib 57` and write .ship/sweep_prompts.json (held-out training prompts, a JSON list:
# `training_prompts(DATA)[6000:6008]`); the tree keeps only the tiny assets for call a and gets
# specdec/assets/eagle3/smollm2 back for call b (each call <= 64 MiB with the tree):
#   call a  carry .whl .ship/gguf.sha256 .ship/gguf.part00     bash scripts/gpu_session.sh a
#   call b  carry .ship/gguf.part01 .ship/sweep_prompts.json    bash scripts/gpu_session.sh b
# Every step has its own time limit (T1, T2, T3_* below, seconds) and a failing step does not
# stop the next; the phase's exit status says whether all passed. Setting: PY (python3), WORK.
set -uo pipefail
cd "$(dirname "$0")/.."
PHASE=${1:?usage: gpu_session.sh pack|1|2|3|a|b}
PY=${PY:-python3}
WORK=${WORK:-outputs/train_gpu/smollm2}
mkdir -p "$WORK" && export WORK=$(cd "$WORK" && pwd)  # absolute: Hydra runs keep their own cwd
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=offline PYTHONUNBUFFERED=1
export SPECDEC_CACHE_DIR=$WORK/cache PYTHONPATH=$PWD:$WORK/site
LOG=$WORK/session/phase$PHASE
mkdir -p "$LOG" "$WORK/ship"
[ "$PHASE" != pack ] && [ -d .ship ] && cp .ship/* "$WORK/ship/"  # this call's carried parts
export SHIP=$WORK/ship
failed=()
step() {  # step NAME SECONDS CMD...: run with a limit, log to $LOG/NAME.txt, note a failure
  local name=$1 limit=$2; shift 2
  echo "== $name (limit ${limit} s)"
  local t0=$SECONDS
  timeout "$limit" "$@" 2>&1 | tee "$LOG/$name.txt"
  local rc=${PIPESTATUS[0]}
  echo "== $name: exit $rc in $((SECONDS - t0)) s"
  [ "$rc" = 0 ] || failed+=("$name")
}

case $PHASE in
pack)
  $PY scripts/gpu_ship.py pack .ship --source ../shared/data --part-mib 47
  ls -la .whl .ship
  exit 0 ;;
1)
  step setup 90 env STAGES=setup PY="$PY" bash scripts/train_gpu.sh
  # every preset on the tiny pair through the replayed static cache (float64), vs ar
  step greedy_tiny "${T1:-150}" $PY scripts/greedy_identity.py --model tiny --device cuda \
    --set model.static_cache=true model.cuda_graphs=true --per-dataset 1 --max-new 24 \
    --out "$LOG/greedy_tiny.json"
  for dtype in float32 bfloat16; do  # the tiny pair's fp32 steps were 4x bf16's: the profile
    step "graphs_tiny_$dtype" 60 $PY scripts/gpu_graphs.py graphs --pair tiny --device cuda \
      --dtype "$dtype" --max-new-tokens 32 --profile 15
  done ;;
2)
  step setup 120 env STAGES=setup PY="$PY" bash scripts/train_gpu.sh
  for dtype in float32 bfloat16; do  # the profile: which kernels the replayed step spends on
    step "graphs_$dtype" "${T2:-90}" $PY scripts/gpu_graphs.py graphs --pair smollm2 \
      --device cuda --dtype "$dtype" --max-new-tokens 64 --profile 15 model.draft=none
  done ;;
3)
  step greedy "${T3_GREEDY:-120}" $PY scripts/greedy_identity.py --device cuda --draft none \
    --set model.static_cache=true --per-dataset 1 --max-new 48 --out "$LOG/greedy_cuda.json" \
    --methods ar pld pld_tree eagle3 eagle3_hsd eagle3_pld specblock specblock_pld \
    specblock_bandit
  for dtype in ${SWEEP_DTYPES:-bfloat16 float32}; do  # GPU presets: trees per dtype, graphs on
    step "sweep_$dtype" "${T3_SWEEP:-150}" $PY scripts/tree_sweep.py --model smollm2 \
      --device cuda --dtype "$dtype" --source "$WORK/train_data" --skip 6000 \
      --prompts "${SWEEP_PROMPTS:-4}" --max-new 96 --e3 specdec/assets/eagle3/smollm2 \
      --sb specdec/assets/specblock/smollm2 --grid "${SWEEP:-4:16 8:32 8:64}" \
      --sb-grid "${SB_SWEEP:-16 32}" --also "${SWEEP_ALSO:-pld eagle3_pld specblock_pld}" \
      --out "$LOG/tree_sweep_$dtype.json"
  done ;;
a)  # the two-call session (pack with --part-mib 57): wheels + part00; every preset on the tiny pair
  step setup 90 env STAGES=setup PY="$PY" bash scripts/train_gpu.sh
  step greedy_tiny "${T1:-150}" $PY scripts/greedy_identity.py --model tiny --device cuda \
    --set model.static_cache=true model.cuda_graphs=true --per-dataset 1 --max-new 24 \
    --out "$LOG/greedy_tiny.json" ;;
b)  # part01 + specdec/assets/eagle3/smollm2 + .ship/sweep_prompts.json: SmolLM2 with graphs
  step setup 120 env STAGES=setup PY="$PY" bash scripts/train_gpu.sh
  step greedy "${T3_GREEDY:-90}" $PY scripts/greedy_identity.py --device cuda --draft none \
    --set model.static_cache=true --per-dataset 1 --max-new 48 --out "$LOG/greedy_cuda.json" \
    --methods ar pld eagle3 eagle3_hsd eagle3_pld
  for dtype in ${SWEEP_DTYPES:-float32 bfloat16}; do
    step "sweep_$dtype" "${T3_SWEEP:-120}" $PY scripts/tree_sweep.py --model smollm2 \
      --device cuda --dtype "$dtype" --source "$SHIP/sweep_prompts.json" --skip 0 \
      --prompts "${SWEEP_PROMPTS:-6}" --max-new 96 --e3 specdec/assets/eagle3/smollm2 \
      --grid "${SWEEP:-4:16 8:32 8:64 10:96}" --sb-grid "" --also "${SWEEP_ALSO:-pld eagle3_pld}" \
      --out "$LOG/tree_sweep_$dtype.json"
  done ;;
*)
  echo "gpu_session: unknown phase $PHASE (pack, 1, 2, 3, a or b)" >&2; exit 2 ;;
esac

if [ -n "${OUT:-}" ] && [ -d "$OUT" ]; then  # on the device: one archive of this phase's logs
  tar -czf "$OUT/phase$PHASE.tar.gz" --exclude='*.safetensors' --exclude='*.ckpt' \
    --exclude='*.pt' -C "$WORK" "session/phase$PHASE" $(cd "$WORK" && ls rates.json tree_sweep.json 2>/dev/null)
fi
if [ ${#failed[@]} -gt 0 ]; then
  echo "gpu_session: phase $PHASE FAILED: ${failed[*]}"
  exit 1
fi
echo "gpu_session: phase $PHASE passed"
