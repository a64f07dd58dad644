"""Cost model: a forward-time table calibrated on this machine turns a forward log into seconds.

Every forward is logged as ``ForwardRecord(role, new_tokens, context, seconds)``;
``calibrate`` measures, per model role, the median time of a cached forward of ``n`` new tokens
(``n = 1..max_new`` plus a few prefill sizes) after a reference context ``c_ref``, each forward
right after a step of the other model (as draft and target alternate in a run, so neither model's
weights are warm in the CPU caches), and the per-context-token slope ``s`` of a 1-token forward
between two contexts. Sizes take turns (round robin), so a slow phase of a shared machine spreads
over all of them. Each size is also measured twice (``CostTable.halves``: the medians of the first
and of the second half of its rounds), so a drop with size in a fitted table can be checked
against two measurements taken one after the other (``specdec.bench.costfit.reproduced_drops``: a
CPU kernel's real shape reproduces, a burst of load does not). The result is a ``CostTable``
(``specdec.bench.pricing``, re-exported here), which prices a record as

    t(role, n, ctx) = T_role(n) + s_role * (ctx - c_ref)

Serial forwards add up: ``CostTable(forwards)`` is the sum (``modeled_s``); overlapped schedules
take maxima at their own level.
"""

from __future__ import annotations

import json
import logging
import statistics
from collections.abc import Callable
from pathlib import Path

import torch

from specdec.bench.pricing import CostTable
from specdec.bench.timing import TimingCheck
from specdec.lm import CachedLM

log = logging.getLogger(__name__)

PREFILL_SIZES = (16, 32, 64, 128, 256)


def _time_forwards(
    lm: CachedLM,
    context: torch.Tensor,
    repeats: dict[int, int],
    gen: torch.Generator,
    other: Callable[[], None] | None = None,
) -> dict[int, list[float]]:
    """Seconds of each timed ``n``-token forward after ``context``, in order, per ``n`` in
    ``repeats`` (``repeats[n]`` of them, after one untimed warm-up forward).

    The sizes take turns (round ``r`` times every size that still has repeats left), so a slow
    phase of a shared machine spreads over all sizes instead of skewing one of them. ``other``
    (untimed) runs before each timed forward: the other model's step, so that this model's
    weights leave the CPU caches as they do when draft and target alternate in a run.
    """
    lm.reset()
    _feed(lm, context)
    lm.keep(list(range(context.numel())))
    times: dict[int, list[float]] = {n: [] for n in repeats}
    for r in range(max(repeats.values()) + 1):
        for n, want in repeats.items():
            if r > want:
                continue
            # 1. The other model's step, then the timed forward of n random tokens.
            tokens = torch.randint(0, lm.vocab_size, (n,), generator=gen)
            if other is not None:
                other()
            _feed(lm, tokens)
            times[n].append(lm.forward_log[-1].seconds)
            lm.crop(context.numel())
    return {n: ts[1:] for n, ts in times.items()}  # round 0 warms up


def _medians(samples: dict[int, list[float]]) -> dict[int, float]:
    """The median of each size's timed forwards."""
    return {n: statistics.median(ts) for n, ts in samples.items()}


def _halves(samples: dict[int, list[float]]) -> list[dict[int, float]]:
    """The medians of the first and of the second half of each size's timed forwards (sizes
    timed at least twice): two measurements of the table taken one after the other."""
    kept = {n: ts for n, ts in samples.items() if len(ts) >= 2}
    return [
        _medians({n: ts[: len(ts) // 2] for n, ts in kept.items()}),
        _medians({n: ts[len(ts) // 2 :] for n, ts in kept.items()}),
    ]


def calibrate(
    target: CachedLM,
    draft: CachedLM | None,
    *,
    max_new: int = 8,
    repeats: int = 7,
    ref_context: int = 128,
    far_context: int = 512,
    seed: int = 0,
) -> CostTable:
    """Measure forward times of ``target`` (and ``draft``) on this machine.

    Args:
        target, draft: the cached models the run uses (their caches are reset afterwards and the
            calibration forwards are removed from their logs).
        max_new: measure every ``n`` in ``1..max_new`` (verification / drafting sizes), plus the
            prefill sizes ``16..256`` for drafts that catch up on prompts.
        repeats: forwards per size (the median is kept, and the medians of each half of them:
            ``CostTable.halves``; at most 2 for the prefill sizes).
        ref_context, far_context: contexts for the table and the context slope.
    """
    if max_new < 1 or repeats < 1:
        raise ValueError(f"max_new and repeats must be >= 1, got {max_new}, {repeats}")
    gen = torch.Generator().manual_seed(seed)
    times: dict[str, dict[int, float]] = {}
    slopes: dict[str, float] = {}
    halves: dict[str, list[dict[int, float]]] = {}
    models = [m for m in (target, draft) if m is not None]
    marks = [len(m.forward_log) for m in models]
    for lm in models:
        others = [m for m in models if m is not lm]
        other = _step_of(others[0], ref_context, gen) if others else None
        ctx = torch.randint(0, lm.vocab_size, (far_context,), generator=gen)
        # 1. T(n) at the reference context, each forward after one step of the other model:
        #    decoding sizes first, then the prefill sizes apart, because a decoding forward
        #    right after a 256-token one runs slow (target 1-token median 48 vs 37 ms here),
        #    which a run never does.
        samples = _time_forwards(
            lm, ctx[:ref_context], {n: repeats for n in range(1, max_new + 1)}, gen, other
        )
        prefill = {n: min(repeats, 2) for n in PREFILL_SIZES if n > max_new}
        if prefill:
            samples.update(_time_forwards(lm, ctx[:ref_context], prefill, gen, other))
        times[lm.role], halves[lm.role] = _medians(samples), _halves(samples)
        # 2. Context slope from 1-token forwards at a far context.
        far = statistics.median(_time_forwards(lm, ctx, {1: repeats}, gen, other)[1])
        slopes[lm.role] = (far - times[lm.role][1]) / (far_context - ref_context)
    for m, mark in zip(models, marks, strict=True):
        m.reset()
        del m.forward_log[mark:]
    return CostTable(times=times, slopes=slopes, ref_context=ref_context, halves=halves)


def _step_of(lm: CachedLM, context: int, gen: torch.Generator) -> Callable[[], None]:
    """An untimed 1-token forward of ``lm`` after ``context`` random tokens, repeatable."""
    lm.reset()
    _feed(lm, torch.randint(0, lm.vocab_size, (context,), generator=gen))
    lm.keep(list(range(context)))

    def step() -> None:
        _feed(lm, torch.randint(0, lm.vocab_size, (1,), generator=gen))
        lm.crop(context)

    return step


def _feed(lm: CachedLM, tokens: torch.Tensor) -> None:
    """Forward ``tokens``; a model fed only through ``inputs_embeds`` (a feature drafter's
    decoder) gets embeddings of the same size instead (same cost, values do not matter)."""
    if lm.takes_ids:
        lm.forward(tokens)
    else:  # a published EAGLE-3 decoder reads [e; g]: twice the hidden size
        width = getattr(getattr(lm, "model", None), "inputs_embeds_width", lm.hidden_size)
        lm.forward(tokens, inputs_embeds=torch.zeros(tokens.numel(), width, dtype=lm.dtype))


def previous_summary(summary_path: Path, config_hash: str, machine: dict) -> dict | None:
    """The ``summary.json`` an earlier run of this folder wrote under the same config hash on the
    same machine (this run resumed or rerun), or None."""
    try:
        old = json.loads(summary_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if (
        not isinstance(old, dict)
        or old.get("config_hash") != config_hash
        or old.get("machine") != machine
    ):
        return None
    return old


def previous_calibration(previous: dict | None) -> CostTable | None:
    """The calibration of the run's earlier summary (``previous_summary``), or None.

    A run keeps one calibration: resuming it, or rerunning it once complete, reuses the table
    instead of measuring a fresh one, so its priced numbers (``self_modeled_speedup``, the sweep
    objective) do not move on a rerun that generates nothing (a fresh calibration moved one from
    0.231 to 0.285: the sizes a run never made are priced by it).
    """
    if not previous or not previous.get("calibration"):
        return None
    return CostTable.from_dict(previous["calibration"])


def start_timing(previous: dict | None, machine: dict) -> TimingCheck:
    """The run's timing check, its start load read now (before the calibration), after the load
    readings of the run's earlier processes (``previous_summary``): a resumed run's forwards were
    timed under every one of them."""
    earlier = (previous or {}).get("timing")
    return TimingCheck.begin(
        int(machine.get("torch_threads", 1)),
        TimingCheck.from_json(earlier) if isinstance(earlier, dict) else None,
    )


def resumed_state(
    summary_path: Path, config_hash: str, machine: dict
) -> tuple[CostTable | None, TimingCheck]:
    """What a run starting now takes from its folder's earlier run (``previous_summary``): that
    run's calibration (None: none) and its timing check, with this start's load read."""
    previous = previous_summary(summary_path, config_hash, machine)
    return previous_calibration(previous), start_timing(previous, machine)


def run_cost_table(
    enabled: bool,
    resume: bool,
    target: CachedLM,
    draft: CachedLM | None,
    previous: CostTable | None,
) -> CostTable | None:
    """A run's fallback cost table (``cost_model=true``): calibrated once on this machine, unless
    the folder's earlier run under this config left its calibration (``previous``, resumed)."""
    if not enabled:
        return None
    if previous is not None and resume:
        log.info("cost table: this run's earlier calibration (%s)", previous.describe())
        return previous
    table = calibrate(target, draft)
    log.info("cost table (ms per forward by new tokens): %s", table.describe())
    return table
