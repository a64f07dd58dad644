"""One dataset of a benchmark run: its prompts, this process's record file, its records.

``DatasetRun`` answers a prompt (``run_prompt``; the prefill split of its forwards), turns the
answer into a record (``GenerationStats.to_record()`` plus the prompt's identity, text, timings,
forwards and the dataset's quality check) and summarises the records; ``run_dataset`` answers
this rank's unrecorded prompts after the run's warm-up (the timing rules are in
``specdec.bench.run.runner``); ``open_runs`` opens each dataset's record file with the prompts
other files hold (resume across ranks and world sizes); ``gather`` merges the rank files on rank 0.
"""

from __future__ import annotations

from pathlib import Path

from hydra.utils import instantiate
from omegaconf import DictConfig

from specdec.bench.costfit import log_columns
from specdec.bench.pricing import forward_profile
from specdec.bench.records import RecordFile
from specdec.bench.run.e2e import prefill_split
from specdec.bench.run.method import Answer, Method, run_prompt
from specdec.bench.run.progress import progress_bar, running
from specdec.bench.run.ranks import Ranks
from specdec.bench.run.shards import merge, merged_path, own_path, recorded_elsewhere
from specdec.bench.run.summary import dataset_metrics
from specdec.data.prompts import Prompt, PromptFile, first_per_category
from specdec.models import ModelPair


class DatasetRun:
    """Generates, records and summarises one dataset of the benchmark."""

    def __init__(
        self,
        cfg: DictConfig,
        name: str,
        pair: ModelPair,
        method: Method,
        file: PromptFile,
        records: RecordFile,
        *,
        ranks: Ranks | None = None,
        elsewhere: frozenset[str] = frozenset(),
    ):
        """``records``: this process's record file; ``elsewhere``: the prompt ids recorded under
        this config in the dataset's other files (other ranks', the merged one)."""
        self.cfg, self.name, self.pair, self.method = cfg, name, pair, method
        self.ranks, self.elsewhere = ranks or Ranks(), elsewhere
        self.ds, self.file, self.rf = cfg.benchmark.datasets[name], file, records
        self.max_new = int(
            cfg.max_new_tokens if cfg.max_new_tokens is not None else self.ds.max_new_tokens
        )
        limit = cfg.limit if cfg.limit is not None else self.ds.get("limit")
        prompts = first_per_category(file.prompts, cfg.get("per_category"))
        self.prompts = list(prompts if limit is None else prompts[: int(limit)])
        self.mine = self.ranks.shard(self.prompts)  # this rank's share (one process: all)
        # the dataset's quality check (specdec.bench.quality), built once when quality=true
        quality = self.ds.get("quality") if cfg.quality else None
        self.check = instantiate(quality) if quality is not None else None
        self.prefill: dict[str, float] = {}

    def generate(self, prompt: Prompt) -> Answer:
        log, mark = self.method.target.forward_log, len(self.method.target.forward_log)
        answer = run_prompt(
            prompt,
            self.pair,
            self.method,
            seed=self.cfg.seed,
            max_new_tokens=self.max_new,
            chat_template=self.ds.chat_template,
            template=self.ds.get("template", "{turn}"),
            truncate=self.cfg.get("truncate_prompts"),
        )
        self.prefill = prefill_split(log[mark:], answer.stats.prefill_s)  # every turn's
        return answer

    def record(self, prompt: Prompt, answer: Answer) -> dict:
        answers, s = answer.answers, answer.stats
        rec = {
            "prompt_id": prompt.id,
            "dataset": self.name,
            "category": prompt.category,
            "method": self.cfg.method_name,
            "seed": self.cfg.seed,
            "turns": len(prompt.turns),
            **s.to_record(),
            "wall_s": s.decode_s,
            "total_s": answer.seconds,
            "truncated_tokens": answer.truncated_tokens,
            "text": "\n\n".join(answers),
            "prompt_tokens": answer.prompt_tokens,
            "output_ids": answer.output_ids,
            "turn_s": answer.turn_seconds,
            "turn_steps": answer.turn_steps,
            **self.prefill,
        }
        if len(answers) > 1:
            rec["answers"] = answers
        rec["forward_profile"] = forward_profile(s.forwards)  # lets a report reprice the run
        rec["forward_log"] = log_columns(s.forwards)  # the run's cost table is fitted on these
        if self.check is not None:
            rec[f"quality_{self.check.name}"] = self.check(
                prompt, answers, timeout_s=self.cfg.quality_timeout_s
            )
        return rec

    def ordered(self) -> list[dict]:
        """This dataset's records in prompt order."""
        by_id = {r["prompt_id"]: r for r in self.rf.records}
        return [by_id[p.id] for p in self.prompts if p.id in by_id]

    def progress(self) -> dict[str, int]:
        """This dataset's prompts recorded under the run's config hash, and expected."""
        return {
            "recorded": len({p.id for p in self.prompts} & (self.rf.done | self.elsewhere)),
            "expected": len(self.prompts),
        }

    def metrics(self, records: list[dict]) -> dict:
        return dataset_metrics(
            records,
            prompt_file_sha256=self.file.sha256,
            max_new_tokens=self.max_new,
            chat_template=bool(self.ds.chat_template),
            template=self.ds.get("template", "{turn}"),
        )


def run_dataset(run: DatasetRun, warm: list[int]) -> list[dict]:
    """Generate this rank's unrecorded prompts of the dataset; returns the records of this
    process's file in prompt order (the whole dataset's for one process)."""
    cfg, rf = run.cfg, run.rf
    todo = [p for p in run.mine if p.id not in rf.done and p.id not in run.elsewhere]
    # 1. Warm-up (once per run, not recorded) on the longest prompts still to do: a cache sized to
    #    what is used (model.max_cache_len: null; the GPU default) grows to the dataset's need,
    #    and its CUDA graphs are captured, before the first timed prompt.
    for prompt in sorted(todo, key=lambda p: sum(map(len, p.turns)), reverse=True)[: warm[0]]:
        run.generate(prompt)
    warm[0] -= min(warm[0], len(todo))
    # the bar of rank 0 only: it stands for every rank (round robin: shares differ by one)
    bar = progress_bar(
        run.name,
        len(run.mine),
        len(run.mine) - len(todo),
        bool(cfg.progress) and run.ranks.main,
        run.ranks.tag if run.ranks.world > 1 else None,
    )
    for prompt in todo:
        # 2. Generate, 3. append + flush the record, 4. update the bar's running metrics.
        rf.append(run.record(prompt, run.generate(prompt)))
        bar.set_postfix(running(rf.records), refresh=False)
        bar.update(1)
    bar.close()
    return run.ordered()


def open_runs(
    cfg: DictConfig,
    out_dir: Path,
    ranks: Ranks,
    chash: str,
    pair: ModelPair,
    method: Method,
    files: dict[str, PromptFile],
) -> list[DatasetRun]:
    """Each dataset's run with this process's record file (corrupt records fail here, before the
    calibration) and the prompts other files hold (resume across ranks and world sizes)."""
    runs, on_bad = [], cfg.get("on_bad_record", "stop")
    for name, file in files.items():
        own = own_path(out_dir / "records", name, ranks)
        rf = RecordFile.open(own, chash, resume=cfg.resume, on_bad=on_bad)
        elsewhere = (
            recorded_elsewhere(out_dir / "records", name, chash, own=own, on_bad=on_bad)
            if cfg.resume
            else set()
        )
        runs.append(
            DatasetRun(
                cfg, name, pair, method, file, rf, ranks=ranks, elsewhere=frozenset(elsewhere)
            )
        )
    return runs


def gather(run: DatasetRun, out_dir: Path) -> list[dict]:
    """Rank 0, every rank done: merge the rank files (if any); the records in prompt order, read
    from the merged file with several ranks (a rerun with nothing new merges nothing)."""
    chash, on_bad = run.rf.config_hash, run.cfg.get("on_bad_record", "stop")
    if (
        merge(
            out_dir / "records",
            run.name,
            chash,
            [p.id for p in run.file.prompts],
            ranks=run.ranks,
            resume=bool(run.cfg.resume),
            on_bad=on_bad,
        )
        or run.ranks.world > 1
    ):
        run.rf = RecordFile.open(merged_path(out_dir / "records", run.name), chash, on_bad=on_bad)
        run.elsewhere = frozenset()
    return run.ordered()
