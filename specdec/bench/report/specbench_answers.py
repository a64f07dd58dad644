"""Spec-Bench answer files: one JSONL row per prompt in Spec-Bench's format (``specbench``).

The format is Spec-Bench's (Xia et al. 2024, arXiv:2401.07851; repository ``hemingkx/Spec-Bench``),
as its answer writer ``evaluation/eval.py`` (``get_model_answers``) and speed script
``evaluation/speed.py`` define it:

* one JSONL answer file per model, ``<model_id>.jsonl``, one row per question: ``question_id``,
  ``category``, ``answer_id``, ``model_id``, ``choices`` and ``tstamp``; each choice is
  ``{index, turns, decoding_steps, new_tokens, wall_time, accept_lengths}`` with one entry per
  turn in ``turns`` (the answer text), ``decoding_steps``, ``new_tokens`` and ``wall_time``
  (seconds of the whole generate call of that turn) and, in ``accept_lengths``, the tokens each
  decoding step of every turn added, in order;
* the speed table, per category and overall: mean accepted tokens = the mean of every
  ``accept_lengths`` entry (Σ new tokens / Σ decoding steps: our τ, ``block_efficiency``);
  tokens/s = the mean over questions of Σ ``new_tokens`` / Σ ``wall_time``; speedup = the method's
  tokens/s / the baseline's tokens/s over the same questions.

Here: ``model_id`` = ``<method>-<pair name>`` (with the run folder's name appended where two runs
would share one); ``question_id`` = the question file's id, an integer as Spec-Bench writes it
(our prompt ids are strings: one that spells an integer is written as that integer, any other
stays a string); ``category`` = the prompt's own category (MT-bench's eight in Spec-Bench's file);
``answer_id`` = a digest of the run's config hash and the prompt id (stable; Spec-Bench draws a
random one); ``tstamp`` = the run's ``summary.json`` time. ``wall_time`` is the turn's prefill +
decode between CUDA syncs (``turn_s`` of a record), as Spec-Bench times the whole call, so these
tokens/s include prefill while the leaderboard's do not. The speed table groups rows as speed.py
selects them (``task_of``): ``mt_bench`` = a category among MT-bench's eight, any other category
by itself. speed.py re-tokenises the baseline's text (``specdec.bench.report.specbench_tokens``).

A record written before per-turn timings (no ``turn_s``/``turn_steps``) with several turns
becomes one turn holding the prompt's totals (its answers joined), with a ``note`` in the row;
its ``accept_lengths`` are rebuilt from ``accepted_per_step`` (every step emits accepted + 1
tokens but a turn's last, cut at a stop id or the token budget).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from specdec.bench.report.runs import Run
from specdec.errors import BadInput

OVERALL = "overall"
MT_BENCH = "mt_bench"
#: the categories speed.py's ``mt_bench`` task selects (MT-bench's eight)
MT_BENCH_CATEGORIES = frozenset(
    {"writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities"}
)
OLD_RECORD_NOTE = (
    "per-prompt totals as one turn: the record predates per-turn timings "
    "(turn_s, turn_steps); rerun its eval command for per-turn entries"
)


@dataclass(frozen=True)
class Entry:
    """One answer row with what the speed table groups it by."""

    dataset: str
    category: str  # speed.py's task of the row (task_of)
    row: dict  # the Spec-Bench answer row


def task_of(category: object) -> str:
    """The speed.py task that selects an answer row of ``category``: ``mt_bench`` for MT-bench's
    eight categories, else the category itself."""
    return MT_BENCH if category in MT_BENCH_CATEGORIES else str(category)


def question_id(prompt_id: str) -> int | str:
    """The Spec-Bench ``question_id`` of a prompt id: the integer it spells, else the id."""
    return (
        int(prompt_id)
        if re.fullmatch(r"-?[0-9]+", prompt_id) and str(int(prompt_id)) == prompt_id
        else prompt_id
    )


def model_id(run: Run) -> str:
    """``<method>-<pair name>``, safe as a file name."""
    pair = (run.summary.model or {}).get("name", "pair")
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", f"{run.method}-{pair}")


def _step_tokens(
    accepted: list[int], turn_tokens: list[int], turn_steps: list[int], where: str
) -> list[int]:
    """Tokens each step added: accepted + 1, but a turn's last step keeps what the turn still
    needed (a stop id or the budget cut it)."""
    if sum(turn_steps) != len(accepted):
        raise BadInput(
            f"{where}: turn_steps sum to {sum(turn_steps)} but accepted_per_step has "
            f"{len(accepted)} steps; rerun its eval command"
        )
    out: list[int] = []
    start = 0
    for tokens, steps in zip(turn_tokens, turn_steps):
        own = [a + 1 for a in accepted[start : start + steps]]
        start += steps
        most = own[-1] if own else 0  # a step adds at most its accepted tokens + 1
        if own:
            own[-1] = tokens - sum(own[:-1])
        if sum(own) != tokens or any(n < 1 for n in own) or (own and own[-1] > most):
            raise BadInput(
                f"{where}: its steps cannot have made {tokens} tokens "
                f"(accepted {accepted}); rerun its eval command"
            )
        out += own
    return out


def _walk_steps(accepted: list[int], turn_tokens: list[int]) -> list[int]:
    """Steps per turn of a record without ``turn_steps``: each turn takes steps until their
    accepted + 1 reach its tokens (exact: only a turn's last step is ever cut)."""
    steps, i = [], 0
    for tokens in turn_tokens:
        made, start = 0, i
        while made < tokens and i < len(accepted):
            made, i = made + accepted[i] + 1, i + 1
        steps.append(i - start)
    steps[-1] += len(accepted) - i  # leftovers (not possible for a well-formed record)
    return steps


def choice_of(record: dict) -> tuple[dict, str | None]:
    """The Spec-Bench choice of one record, and a note when it is a single-turn equivalent."""
    where = f"record {record.get('prompt_id')!r} of dataset {record.get('dataset')}"
    texts = record.get("answers") or [record.get("text", "")]
    accepted = [int(a) for a in record.get("accepted_per_step", [])]
    ids = record.get("output_ids")
    turn_tokens = [len(t) for t in ids] if ids else [int(record["new_tokens"])]
    if "turn_s" in record and "turn_steps" in record:
        steps = [int(s) for s in record["turn_steps"]]
        return {
            "index": 0,
            "turns": list(texts),
            "decoding_steps": steps,
            "new_tokens": turn_tokens,
            "wall_time": [float(t) for t in record["turn_s"]],
            "accept_lengths": _step_tokens(accepted, turn_tokens, steps, where),
        }, None
    total_s = float(record.get("total_s", record["wall_s"] + record.get("prefill_s", 0.0)))
    if ids:
        lengths = _step_tokens(accepted, turn_tokens, _walk_steps(accepted, turn_tokens), where)
    else:  # before output_ids: turn ends unknown, trim the surplus from the last steps
        lengths = [a + 1 for a in accepted]
        surplus = sum(lengths) - int(record["new_tokens"])
        for j in reversed(range(len(lengths))):
            cut = min(surplus, lengths[j] - 1)
            lengths[j], surplus = lengths[j] - cut, surplus - cut
    several = len(texts) > 1
    return {
        "index": 0,
        "turns": ["\n\n".join(texts)] if several else list(texts),
        "decoding_steps": [len(accepted)],
        "new_tokens": [sum(lengths)],
        "wall_time": [total_s],
        "accept_lengths": lengths,
    }, (OLD_RECORD_NOTE if several else None)


def entries(run: Run, mid: str | None = None) -> list[Entry]:
    """The run's answer rows, dataset by dataset in summary order, records in file order."""
    mid = mid or model_id(run)
    summary_file = run.path / "summary.json"
    tstamp = summary_file.stat().st_mtime if summary_file.exists() else 0.0
    chash = run.summary.config_hash or ""
    out = []
    for dataset in run.summary.datasets:
        for rec in run.records(dataset):
            choice, note = choice_of(rec)
            digest = hashlib.sha256(f"{chash}:{dataset}:{rec['prompt_id']}".encode()).hexdigest()
            row = {
                "question_id": question_id(rec["prompt_id"]),
                "category": rec.get("category"),
                "answer_id": digest[:22],
                "model_id": mid,
                "choices": [choice],
                "tstamp": tstamp,
            }
            if note:
                row["note"] = note
            out.append(Entry(dataset, task_of(rec.get("category")), row))
    return out


def write_answers(run: Run, out_dir: str | Path, mid: str | None = None) -> Path:
    """Write ``<out_dir>/<model_id>.jsonl`` (every dataset of the run); returns its path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{mid or model_id(run)}.jsonl"
    rows = [e.row for e in entries(run, mid)]
    path.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
    )
    return path
