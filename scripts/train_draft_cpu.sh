#!/usr/bin/env bash
# The CPU recipe for the shipped SmolLM2 draft (resumable; run it under nohup):
#   nohup scripts/train_draft_cpu.sh > outputs/distill_smollm2_cpu.log 2>&1 &
# 1. stage=data: target top-k labels on reference answers for DATA_MINUTES (rerun to add more);
# 2. fit: distil the draft for at most FIT_TIME (resumes from the last checkpoint if present),
#    then test and export to specdec/assets/smollm2-draft/ (EXPORT_DIR to change).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f .venv/bin/activate ] && source .venv/bin/activate
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=offline PYTHONUNBUFFERED=1
RUN=${RUN:-outputs/distill_smollm2_cpu}
EXP="+experiment=distill_draft_smollm2"
python -m specdec.train $EXP stage=data data_gen.max_minutes=${DATA_MINUTES:-15} \
  data_gen.batch_size=${GEN_BATCH:-8} hydra.run.dir=$RUN/data
RESUME=()
[ -f "$RUN/fit/checkpoints/last.ckpt" ] && RESUME=(ckpt_path=$RUN/fit/checkpoints/last.ckpt)
python -m specdec.train $EXP logger=csv hydra.run.dir=$RUN/fit \
  trainer.max_steps=${STEPS:-400} +trainer.max_time=${FIT_TIME:-00:00:45:00} \
  trainer.val_check_interval=${VAL_EVERY:-50} datamodule.batch_size=${BATCH:-8} \
  datamodule.max_len=320 learner.lr=3e-4 learner.warmup_steps=30 \
  distill.export_dir=${EXPORT_DIR:-specdec/assets/smollm2-draft} "${RESUME[@]}"
