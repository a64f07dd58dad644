"""The benchmark runner behind ``python -m specdec.eval``: one method preset, one pair, a benchmark.

Steps: load the pair once → build target ``CachedLM``, drafter, verifier from the config groups →
(``cost_model=true``) calibrate a short fallback cost table once (``calibration.run_cost_table``: a
resumed or rerun folder reuses its own) → for each dataset of ``benchmark``: load its prompts, skip
those already recorded under this config hash (resume; the hash covers the digests of the learned
weights, ``specdec.bench.run.fingerprint``, and of each prompt file's bytes,
``specdec.data.prompts.read_prompt_file``), generate every remaining prompt with per-prompt coins
seeded from (seed, prompt id), append one JSONL record per prompt → ``summary.json`` (metrics of
``specdec.metrics`` per dataset and overall; ``modeled_s`` priced by a cost table fitted on the
run's own forward log, ``specdec.bench.costfit``; paired with the command's ``ar`` run,
``specdec.bench.run.paired``; whether its times back a speedup claim: ``specdec.bench.timing``)
→ logger. A record (``specdec.bench.run.dataset_run``) is ``GenerationStats.to_record()`` plus the
prompt's identity, text, timings and decode forwards (``forward_log``), and per turn the new token
ids (``output_ids``), the prompt's length (``prompt_tokens``), seconds and steps (``turn_s``,
``turn_steps``: Spec-Bench's fields).

Timing rules (the same for every method, AR included):

1. Warm-up: the ``warmup`` longest prompts still to run are generated once and not recorded, so
   one-off costs (allocator growth, kernel selection, lazy imports, a growing static cache's
   growth and its CUDA-graph captures) stay out of every timing.
2. Prefill is timed apart (``prefill_s``: ``prefill_target_s`` + ``prefill_draft_s``,
   ``specdec.bench.run.e2e``); ``wall_s`` and ``tokens_per_s`` cover decoding only (the engine's
   ``time.perf_counter``); ``total_s`` (prefill + decode between the two syncs) and
   ``e2e_tokens_per_s`` are end to end.
3. CUDA is synchronised at generation boundaries (before and after each turn's ``generate``,
   every device of the pair) and, with ``cost_model=true``, around each forward of the pair's
   models, whose times the cost table is fitted on (``specdec.lm.CachedLM(synchronize=)``; a
   method overlapping work across devices is then timed serially: ``cost_model=false`` for its
   wall clock).
4. Time outside generation (tokenising, quality checks, writing records) is not counted.

Artifacts: ``records/<dataset>.jsonl`` (``specdec.bench.records``), ``summary.json`` (every dataset
+ ``overall``, ``complete``, ``progress``), ``summary/<dataset>.json``, all strict JSON; ``.lock``
is held while a run works in the folder (``specdec.bench.rundir``).
Data-parallel (``torchrun``, ``specdec.bench.run.ranks``): each rank answers its round-robin share
of each dataset into its own file; after each dataset the ranks meet, rank 0 merges the files
(``run.shards``), prices and summarises as one process would (a rank without prompts just waits).
"""

from __future__ import annotations

import copy
import importlib.util
import logging
from pathlib import Path

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from specdec.bench.quality import check_unsafe_code_confirmed
from specdec.bench.records import config_hash
from specdec.bench.run.calibration import resumed_state, run_cost_table
from specdec.bench.run.checks import check_target_output, check_where_loaded
from specdec.bench.run.dataset_run import gather, open_runs, run_dataset
from specdec.bench.run.e2e import end_to_end
from specdec.bench.run.fingerprint import (
    learned_weights,
    machine_tag,
    provenance,
    software_versions,
)
from specdec.bench.run.loggers import EvalLogger
from specdec.bench.run.method import build_method
from specdec.bench.run.pair_cache import shared_pair
from specdec.bench.run.paired import baseline_for, pair_run
from specdec.bench.run.preflight import preflight
from specdec.bench.run.ranks import Ranks
from specdec.bench.run.schema import validate
from specdec.bench.run.shards import remove_ranks_dir
from specdec.bench.run.summary import check_metric_name, price_run, write_summaries
from specdec.bench.run.table import format_table
from specdec.bench.run_summary import RunSummary
from specdec.bench.rundir import RunLock
from specdec.bench.wandb_artifacts import RunTag
from specdec.data.prompts import read_prompt_file
from specdec.errors import BadInput
from specdec.metrics import GenerationStats, summarize
from specdec.models import ModelPair

log = logging.getLogger(__name__)


def run(cfg: DictConfig, ranks: Ranks | None = None) -> dict:
    """Run the evaluation described by ``cfg`` as ``ranks`` (default: ``torchrun``'s environment
    variables, else one process); returns the summary as written (``RunSummary.to_json()``; rank
    0's on every rank)."""
    validate(cfg)  # bad scalar values fail here, naming the key, before anything loads
    check_metric_name(cfg.get("optimized_metric"))
    if not cfg.benchmark.get("datasets"):
        raise BadInput(
            "the benchmark has no datasets; pick one with benchmark=<name> (conf/benchmark/)"
        )
    check_unsafe_code_confirmed(cfg)  # before any model loads: HumanEval runs model code
    preflight(cfg)  # a pair that cannot load, a device that cannot hold, a missing draft or asset
    ranks = ranks if ranks is not None else Ranks.from_env()
    device = ranks.device(str(cfg.device))  # cuda:<LOCAL_RANK> per rank for device=cuda
    ranks.start(device, float(cfg.rank_timeout_s))
    out_dir = Path(cfg.paths.output_dir)
    ranks.agree(str(out_dir), "one run folder (hydra.run.dir=<dir>, no ${now:...} in it)")
    lock = ".lock" if ranks.main else f".lock.rank{ranks.rank}"
    with RunLock(out_dir, lock):  # a second run of this folder fails here, naming the holder's pid
        return _run(cfg, out_dir, ranks, device)


def _run(cfg: DictConfig, out_dir: Path, ranks: Ranks, device: str) -> dict:
    """The run itself, with the run directory's lock held."""
    if importlib.util.find_spec("datasets"):  # a GPU image may lack it; only its bars are off
        importlib.import_module("datasets").disable_progress_bars()
    (out_dir / "summary").mkdir(parents=True, exist_ok=True)
    # everything but the hydra node resolved, as given (device=cuda): every rank hashes the same
    resolved = {
        k: OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v
        for k, v in cfg.items()
        if k != "hydra"
    }
    if device != str(cfg.device):  # this rank's own GPU
        cfg = copy.deepcopy(cfg)
        cfg.device = device
    if cfg.get("threads"):
        torch.set_num_threads(int(cfg.threads))  # the machine tag records the count
    cache = Path(cfg.paths.cache_dir) / "datasets"
    files = {
        name: read_prompt_file(ds.path, name, cache_dir=cache)  # bad data fails here
        for name, ds in cfg.benchmark.datasets.items()
    }
    pair: ModelPair = shared_pair(cfg.model)  # a multirun's jobs on one pair load it once
    check_where_loaded(pair, device)  # the records and the machine tag say where it ran
    method = build_method(cfg, pair)
    check_target_output(pair)  # NaN weights or an overflowing dtype: named before decoding
    # retrained weights at the same path, or edited prompts in one file, must not resume records
    weights = learned_weights(pair.target, pair.draft, method.drafter, method.verifier)
    prompt_files = {name: f.sha256 for name, f in files.items()}
    chash = config_hash({**resolved, "learned_weights": weights, "prompt_files": prompt_files})
    runs = open_runs(cfg, out_dir, ranks, chash, pair, method, files)
    warm, timeout = [int(cfg.warmup)], float(cfg.rank_timeout_s)
    if not ranks.main:  # answer this rank's share; rank 0 merges, summarises and logs
        for ds_run in runs:
            run_dataset(ds_run, warm)
            ranks.barrier(f"dataset {ds_run.name}", timeout)
        return ranks.broadcast(None)
    machine = machine_tag(pair.devices())
    previous, timing = resumed_state(out_dir / "summary.json", chash, machine)  # load read now
    cost = run_cost_table(
        bool(cfg.get("cost_model", False)),
        bool(cfg.resume),
        method.target,
        next(iter(method.drafter.models), None),
        previous,
    )
    summary = RunSummary(
        method=cfg.method_name,
        datasets={},
        lossless=bool(method.verifier.lossless),
        model=pair.describe(),
        learned_weights=weights,
        prompt_files=prompt_files,
        sampling=resolved["sampling"],
        seed=cfg.seed,
        machine=machine,
        software=software_versions(),
        provenance=provenance(),
        config_hash=chash,
        complete=False,
        datasets_done=[],
        progress={},
        cost_model=cost is not None,
        cost_table=cost.to_dict() if cost is not None else None,
        overall={},
        config=resolved,
        world_size=ranks.world if ranks.world > 1 else None,
        timing=timing if cost is not None else None,
    )
    write_summaries(out_dir, summary, {r.name: r.progress() for r in runs})  # not complete yet
    logger: EvalLogger = instantiate(cfg.logger.eval)  # conf/logger/: the eval node
    try:
        logger.log_config(resolved, RunTag.from_summary(summary))
        all_records, by_dataset = [], {}
        for ds_run in runs:
            # 1. Answer this rank's share, 2. wait for the other ranks, 3. merge their records.
            run_dataset(ds_run, warm)
            ranks.barrier(f"dataset {ds_run.name}", timeout)
            records = by_dataset[ds_run.name] = gather(ds_run, out_dir)
            # 4. Summarise the dataset and the run so far, 5. log them.
            metrics = summary.datasets[ds_run.name] = ds_run.metrics(records)
            all_records += records
            summary.overall = {
                **summarize([GenerationStats.from_record(r) for r in all_records]),
                **end_to_end(all_records),
            }
            price_run(summary, by_dataset, cost)  # refits on every dataset's records so far
            write_summaries(out_dir, summary, {r.name: r.progress() for r in runs}, ds_run.name)
            logger.log_dataset(ds_run.name, metrics)
            logger.log_records(ds_run.name, records)
        pair_run(summary, out_dir, baseline_for(cfg))  # sweep_objective (specdec.bench.run.paired)
        write_summaries(out_dir, summary, {r.name: r.progress() for r in runs})
        remove_ranks_dir(out_dir / "records")  # every rank is done appending
        logger.log_dataset("overall", summary.overall)
        logger.log_summary(
            [out_dir / "summary.json", *sorted((out_dir / "summary").glob("*.json"))]
        )
    finally:
        logger.finish()
    note = "" if summary.timing is None else "\n" + summary.timing.line()  # timing: ok | ...
    print(format_table(cfg.method_name, {**summary.datasets, "overall": summary.overall}) + note)
    log.info("wrote %s", out_dir / "summary.json")
    return ranks.broadcast(summary.to_json())
