#!/usr/bin/env bash
# The feature drafters' GPU training recipe: a short GPU window (~15 min) spent
# training, not setting up. Stages, each timed, each resumable / idempotent (rerunning the script
# skips what is done: trace chunks are kept, a finished fit trains nothing and re-exports):
#   setup     wheels from $WHEELS; join the carried parts in $SHIP (gpu_ship.py join); imports
#   data      the target answers PROMPTS training prompts on the device, batched (GEN_BATCH per
#             generate call), traces only (data_gen.features=none), at most GEN_MINUTES
#   eagle3    EAGLE-3 for E3_MINUTES with online target features (datamodule.features=online)
#   specblock SpecBlock warm-started from that EAGLE-3 (learner.init_eagle3), SB_MINUTES
#   (export)  each fit exports into $OUT/eagle3, $OUT/specblock in shards of <= SHARD_MIB
#   sweep     ar / EAGLE-3 topk:total_tokens (SWEEP) / SpecBlock total_tokens (SB_SWEEP) tokens/s on
#             SWEEP_PROMPTS held-out TRAINING prompts (past the PROMPTS traced ones; never eval
#             prompts): a table, and $OUT/tree_sweep.json
# It prints tokens/s of data generation (continuation tokens / s) and of training (tokens seen /
# s, ~ steps x batch x mean trace length), and writes them to $OUT/rates.json.
#
#   MODEL=tiny DEVICE=cpu TRAIN_DATA=<folder like shared/data> PROMPTS=8 GEN_BATCH=4 MAX_NEW=8 \
#     E3_STEPS=4 SB_STEPS=4 E3_BATCH=4 SB_BATCH=4 SWEEP_PROMPTS=2 SWEEP=2:4 SB_SWEEP=4 \
#     bash scripts/train_gpu.sh          # the CPU dry run (tests/learners/test_train_gpu.py)
#   bash scripts/train_gpu.sh          # MODEL=smollm2 on cuda: the recipe
#
# GPU procedure (the device tool: <= 64 MiB carried per call, <= 8 files of <= 16 MiB back): the
# calls of scripts/gpu_session.sh (pack here; phase 1 sets up and installs the wheels, phase 2
# joins the GGUF, phase 3 runs this recipe with the shipped drafters in the tree). A call's
# carried paths are there during that call only; each phase copies them into $WORK/ship (SHIP),
# which stays while the machine is warm. Budget: GEN_MINUTES + E3_MINUTES + SB_MINUTES +
# conversions and sweep (~2 min) inside one call of <= 10 min, and the session's 15 device minutes
# (an H200 start took ~40 s, each of calls 1-2 ~2 min, on 2026-11-27).
# $OUT comes back: eagle3/ and specblock/ (config.json, index, 2 shards each: 8 files) and, when
# room is left, tree_sweep.json and rates.json (else printed as JSON lines at the end). Install:
# copy each folder to specdec/assets/<kind>/smollm2/ (model card kept by hand).
# Settings (environment; defaults in scripts/train_gpu.py): MODEL=smollm2|tiny, DEVICE=cuda|cpu,
# WORK (traces, runs, converted target: what reruns resume; outputs/train_gpu/$MODEL), OUT (exports
# and JSON; $WORK/out), TRAIN_DATA ($WORK/train_data), SHIP (.ship), WHEELS (.whl), STAGES
# (setup,data,eagle3,specblock,sweep), PROMPTS=6000 (traced), GEN_BATCH=256, MAX_NEW=128,
# GEN_MINUTES=3, E3_MINUTES=3, SB_MINUTES=3, E3_STEPS=4000 and SB_STEPS=2000 (the cosine schedule's
# length: ~ minutes x the printed steps/s), E3_BATCH=64, SB_BATCH=16, VAL_EVERY=250, SHARD_MIB=15,
# SWEEP_PROMPTS=16, SWEEP_NEW=128, SWEEP="4:16 8:32 8:64 10:96" (topk:total_tokens), SB_SWEEP="8 16 32".
# SELF_INSTRUCT=1100, CODE_PROMPTS=576 (prompts the target writes itself, raw code completions; 0:
# none), E3_INIT=shipped (EAGLE-3 warm-starts from specdec/assets/eagle3/$MODEL when carried;
# a folder; none: from the target's layers).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
MODEL=${MODEL:-smollm2}
export WORK=${WORK:-outputs/train_gpu/$MODEL}
export STAGES=${STAGES:-setup,data,eagle3,specblock,sweep}
SHIP=${SHIP:-.ship}
WHEELS=${WHEELS:-.whl}
export MODEL HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=offline PYTHONUNBUFFERED=1
export SPECDEC_CACHE_DIR=${SPECDEC_CACHE_DIR:-$WORK/cache}   # the converted target lives there
export PYTHONPATH=$PWD:$WORK/site${PYTHONPATH:+:$PYTHONPATH}  # wheels and the joined GGUF
mkdir -p "$WORK/site"

if [[ ",$STAGES," == *",setup,"* ]]; then
  t0=$SECONDS
  if compgen -G "$WHEELS/*.whl" >/dev/null; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target "$WORK/site" "$WHEELS"/*.whl || { echo "train_gpu: wheels from $WHEELS failed" >&2; exit 1; }
  fi
  convert=$([ "$MODEL" = smollm2 ] && echo --convert)
  setup=$($PY scripts/gpu_ship.py join "$SHIP" "$WORK" --check $convert) || exit $?
  echo "train_gpu: setup $setup ($((SECONDS - t0)) s)"
  if [ "${DEVICE:-cuda}" != cpu ] && [[ "$setup" != *'"cuda": true'* ]]; then
    echo "train_gpu: DEVICE=${DEVICE:-cuda} but CUDA is not available here" >&2; exit 1
  fi
fi
t0=$SECONDS
$PY scripts/train_gpu.py || exit $?
echo "train_gpu: stages done in $((SECONDS - t0)) s"
