#!/usr/bin/env bash
# The CPU recipe for the shipped SmolLM2 draft (resumable; run it under nohup):
#   nohup scripts/train_draft_cpu.sh > outputs/distill_smollm2_cpu.log 2>&1 &
# 1. stage=data for DATA_MINUTES (rerun to add more): DATA=traces (default) stores the target's own
#    greedy continuations of training prompts (on-policy, ~110 new tokens/s on 2 cores);
#    DATA=reference scores reference answers instead (prefill only, ~2x the tokens/s, off-policy);
#    FIRST_CHUNK=N skips the prompts of chunks < N (those a warm-started draft already saw);
# 2. fit: distil the draft for at most FIT_TIME (resumes from the last checkpoint if present),
#    then test and export to $RUN/fit/export/; INSTALL=1 replaces the shipped
#    specdec/assets/draft_lm/smollm2/ instead (export.install=true export.force=true), EXPORT_DIR=DIR
#    writes DIR (refused if it holds files); INIT_FROM=DIR warm-starts from a draft in the shipped
#    format (learner.init_from); LR, WARMUP, BATCH.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f .venv/bin/activate ] && source .venv/bin/activate
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=offline PYTHONUNBUFFERED=1
RUN=${RUN:-outputs/distill_smollm2_cpu}
EXP="+experiment=draft_lm_smollm2"
if [ "${DATA:-traces}" = traces ]; then
  GEN=(data_gen._target_=specdec.data.traces.make_traces "+data_gen.passes=[{temperature:0.0}]"
       +data_gen.max_new=${MAX_NEW:-192} "~data_gen.max_len" data_gen.batch_size=${GEN_BATCH:-32}
       +data_gen.first_chunk=${FIRST_CHUNK:-0})
else
  GEN=(data_gen.batch_size=${GEN_BATCH:-8})
fi
python -m specdec.train $EXP stage=data data_gen.max_minutes=${DATA_MINUTES:-15} \
  hydra.run.dir=$RUN/data "${GEN[@]}"
RESUME=()
[ -f "$RUN/fit/checkpoints/last.ckpt" ] && RESUME=(ckpt_path=$RUN/fit/checkpoints/last.ckpt)
[ -n "${INIT_FROM:-}" ] && RESUME+=(learner.init_from=$INIT_FROM)
EXPORT=()
[ -n "${EXPORT_DIR:-}" ] && EXPORT=(export.folder=$EXPORT_DIR)
[ "${INSTALL:-0}" = 1 ] && EXPORT=(export.install=true export.force=true)
python -m specdec.train $EXP logger=csv hydra.run.dir=$RUN/fit \
  trainer.max_steps=${STEPS:-400} +trainer.max_time=${FIT_TIME:-00:00:45:00} \
  trainer.val_check_interval=${VAL_EVERY:-50} datamodule.batch_size=${BATCH:-8} \
  datamodule.max_len=320 learner.lr=${LR:-3e-4} learner.warmup_steps=${WARMUP:-30} \
  "${EXPORT[@]}" "${RESUME[@]}"
