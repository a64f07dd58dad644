"""A cost table fitted on a run's own forward log, so modeled and wall time see the same machine.

The modeled clock (``specdec.bench.pricing``) prices a run as ``t(role, n, ctx) = T_role(n) +
s_role * (ctx - c_ref)``. A short
calibration before the run (``specdec.bench.run.calibration``) measures that table in 15 seconds; on
a shared machine those 15 seconds may fall in a slow or a fast phase the run never sees (an audit
priced a 1-token target forward at 149 ms and a 2-token one at 61 ms). The run itself times every
forward it makes -- thousands of samples taken under its own conditions -- so the table is fitted
on them:

1. every record stores its decode forwards compactly (``log_columns``; ``log_rows`` reads them);
2. per role, the context slope ``s`` is the count-weighted mean, over sizes ``n`` with at least
   ``4 * min_samples`` forwards and a context spread of 32 tokens or more, of a line through the
   medians of four context quartiles (robust to outliers, unlike least squares on raw points);
   a role without such a size keeps the calibration's slope (or 0);
3. ``T(n)`` = the mean of ``seconds - s * (ctx - c_ref)`` over that size's forwards (``trim``
   drops a fraction at each end; default none), for every size with at least ``min_samples``
   forwards -- a mean, not a median, because the modeled clock must add up to what the forwards
   took under the run's load, heavy tail included (a median misses a loaded machine's slow
   forwards, and with them the agreement with the wall clock); sizes the run (nearly)
   never made take the short calibration's value times the role's median fitted/calibrated
   ratio (a calibration taken in a slow phase is rescaled to the run's speed), so a table
   priced on another run (the ``ar`` baseline of a speedup) still covers its sizes -- the fit's
   report says which sizes are ``fitted`` and which ``calibrated``, with the
   ``calibration_scale``;
4. ``monotone_violations`` lists the sizes whose time drops by more than ``MONOTONE_TOLERANCE``
   (10 %) below a smaller size's (the peak: the most expensive smaller size) and, where both
   sizes were fitted, by more than ``NOISE_SIGMAS`` standard errors of the two means (``stderr``
   in the report): a table that says a bigger verify is cheaper than a smaller one, beyond its
   noise, is suspect;
5. ``kernel_shape`` lists the violations that are the kernel's real shape, not load: those the
   calibration measured too, in both of its halves (``CostTable.halves``: two measurements of
   every size taken one after the other), each half's time ratio ``t(n) / t(peak)`` within
   ``SHAPE_TOLERANCE`` of the table's (``reproduced_drops``). A CPU kernel can make 4 tokens
   cheaper than 3 on every measurement (SmolLM2-135M: 124 ms at 3, 100 ms at 4); a burst of
   load that priced a 1-token forward at 72 ms against 0.15 ms for 2 tokens is in no
   calibration. The other violations (``unexplained_violations``) mark the run's timing
   unreliable (``specdec.bench.timing``); a calibration without halves (older runs) explains
   none. A drop between two sizes the run made itself is also the shape when both halves of the
   run's own forwards (its first and second half, in log order) show it: the run's forwards of
   1 and 2 tokens do different work than the calibration's (an EAGLE-3 draft's 1-token forward
   carries the target features, its 2-token ones are tree levels), and load cannot make one of
   two interleaved sizes cheaper than the other for a whole run.

Pairs of runs (a method and its ``ar`` baseline) are priced with one table fitted on both runs'
logs (``fit_cost_table`` takes any number of logs).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence

from specdec.bench.pricing import CostTable
from specdec.forwards import ForwardRecord

Columns = dict[str, list]  # a forward log as columns (see ``log_columns``)
MONOTONE_TOLERANCE = 0.10  # a bigger forward may look this much cheaper than a smaller one
NOISE_SIGMAS = 3.0  # ... and, between two fitted sizes, only a drop beyond this many errors counts
SHAPE_TOLERANCE = 0.10  # a drop reproduces when a half's t(n)/t(peak) is this close to the table's


def log_columns(forwards: Sequence[ForwardRecord]) -> Columns:
    """A record's decode forwards as JSON columns: role and lane as indices into name lists,
    new tokens ``n``, context ``c``, microseconds ``us`` and decoding ``step``."""
    roles = sorted({f.role for f in forwards})
    lanes = sorted({f.lane for f in forwards})
    return {
        "roles": roles,
        "lanes": lanes,
        "role": [roles.index(f.role) for f in forwards],
        "lane": [lanes.index(f.lane) for f in forwards],
        "n": [int(f.new_tokens) for f in forwards],
        "c": [int(f.context) for f in forwards],
        "us": [round(1e6 * f.seconds) for f in forwards],
        "step": [int(f.step) for f in forwards],
    }


def log_rows(cols: Columns) -> list[ForwardRecord]:
    """``log_columns`` read back (times to the microsecond; start/end are not kept)."""
    return [
        ForwardRecord(cols["roles"][r], n, c, us / 1e6, lane=cols["lanes"][la], step=st)
        for r, la, n, c, us, st in zip(
            cols["role"], cols["lane"], cols["n"], cols["c"], cols["us"], cols["step"], strict=True
        )
    ]


def record_modeled_s(record: dict, table: CostTable) -> float:
    """A record's decode forwards (``forward_log``) priced by ``table``, overlap included."""
    return table(log_rows(record["forward_log"]))


def _quartile_slope(points: list[tuple[int, float]]) -> float | None:
    """Slope of the least-squares line through the medians of four context quartiles."""
    points = sorted(points)
    if points[-1][0] - points[0][0] < 32:
        return None
    q = len(points) // 4
    bins = [points[i * q : (i + 1) * q if i < 3 else len(points)] for i in range(4)]
    xs = [statistics.median(c for c, _ in b) for b in bins]
    ys = [statistics.median(t for _, t in b) for b in bins]
    mx, my = sum(xs) / 4, sum(ys) / 4
    var = sum((x - mx) ** 2 for x in xs)
    return None if var == 0 else sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var


def fit_cost_table(
    logs: Iterable[Sequence[ForwardRecord]],
    fallback: CostTable | None = None,
    *,
    min_samples: int = 5,
    ref_context: int | None = None,
    trim: float = 0.0,
) -> tuple[CostTable, dict]:
    """Fit ``T_role(n)`` and ``s_role`` on forward logs (steps 2-3 of the module docstring).

    Args:
        logs: forward logs (one per record, of one or several runs).
        fallback: the short calibration, for sizes and roles the logs lack.
        min_samples: forwards a size needs to be fitted.
        ref_context: ``c_ref`` (default: the fallback's, else the median context of the logs).
        trim: fraction of a size's forwards dropped at each end before averaging.

    Returns:
        the table and a report ``{"fitted": {role: {"n": count}}, "calibrated": {role: [n...]},
        "monotone_violations": {role: [n...]}, "kernel_shape": {role: [n...]},
        "calibration_scale": {role: ratio}, "stderr": {role: {"n": seconds}}}`` (``stderr``: of
        each fitted size's mean; ``kernel_shape``: the violations the fallback's halves
        reproduce, steps 4-5 of the module docstring).

    Raises:
        ValueError: no forwards and no fallback (nothing to price with).
    """
    samples: dict[str, dict[int, list[tuple[int, float]]]] = {}
    for log in logs:
        for f in log:
            samples.setdefault(f.role, {}).setdefault(int(f.new_tokens), []).append(
                (int(f.context), float(f.seconds))
            )
    if not samples and fallback is None:
        raise ValueError("no forwards to fit a cost table on, and no calibration to fall back on")
    if ref_context is None:
        contexts = [c for sizes in samples.values() for pts in sizes.values() for c, _ in pts]
        ref_context = fallback.ref_context if fallback else int(statistics.median(contexts))
    times: dict[str, dict[int, float]] = {}
    slopes: dict[str, float] = {}
    report: dict = {"fitted": {}, "calibrated": {}, "monotone_violations": {}, "kernel_shape": {}}
    errors: dict[str, dict[int, float]] = {}
    at_ref_by_role: dict[str, dict[int, list[float]]] = {}
    roles = sorted(set(samples) | set(fallback.times if fallback else {}))
    for role in roles:
        sizes = samples.get(role, {})
        # 1. Context slope from the well-sampled sizes (count-weighted), else the calibration's.
        fits = [(len(p), _quartile_slope(p)) for p in sizes.values() if len(p) >= 4 * min_samples]
        fits = [(w, s) for w, s in fits if s is not None]
        base_slope = fallback.slopes.get(role, 0.0) if fallback else 0.0
        slopes[role] = sum(w * s for w, s in fits) / sum(w for w, _ in fits) if fits else base_slope
        # 2. T(n) at c_ref for every well-sampled size.
        at_ref = {
            n: [t - slopes[role] * (c - ref_context) for c, t in pts]
            for n, pts in sizes.items()
            if len(pts) >= min_samples
        }
        times[role] = {n: trimmed_mean(ts, trim) for n, ts in at_ref.items()}
        at_ref_by_role[role] = at_ref
        errors[role] = {
            n: statistics.stdev(ts) / len(ts) ** 0.5 for n, ts in at_ref.items() if len(ts) > 1
        }
        report["fitted"][role] = {str(n): len(sizes[n]) for n in sorted(times[role])}
    # 3. Sizes the run (nearly) never made: the calibration, rescaled to the run's speed.
    for role in roles:
        if fallback is not None and role in fallback.times:
            ratio = _speed_ratio(times, fallback, [role]) or _speed_ratio(times, fallback, roles)
            missing = [n for n in fallback.times[role] if n not in times[role]]
            times[role].update({n: ratio * fallback.times[role][n] for n in missing})
            report["calibrated"][role] = sorted(missing)
            report.setdefault("calibration_scale", {})[role] = ratio
        if not times[role]:  # a few forwards and no calibration: better than nothing
            times[role] = {
                n: statistics.median(t for _, t in pts) for n, pts in samples[role].items()
            }
        times[role] = dict(sorted(times[role].items()))
        peaks = drop_peaks(times[role], errors[role])
        report["monotone_violations"][role] = list(peaks)
        cal = reproduced_drops(
            times[role], peaks, fallback.halves.get(role, []) if fallback else []
        )
        own = reproduced_drops(times[role], peaks, _run_halves(at_ref_by_role.get(role, {}), trim))
        report["kernel_shape"][role] = sorted(set(cal) | set(own))
    report["stderr"] = {
        role: {str(n): e for n, e in sorted(errs.items())} for role, errs in errors.items()
    }
    return CostTable(times=times, slopes=slopes, ref_context=ref_context), report


def _run_halves(at_ref: dict[int, list[float]], trim: float) -> list[dict[int, float]]:
    """The run's own two measurements of each size it made: the means of the first and second
    half of its samples (log order), for sizes with at least two samples in each half."""
    sizes = {n: ts for n, ts in at_ref.items() if len(ts) >= 4}
    return [
        {n: trimmed_mean(ts[: len(ts) // 2], trim) for n, ts in sizes.items()},
        {n: trimmed_mean(ts[len(ts) // 2 :], trim) for n, ts in sizes.items()},
    ]


def trimmed_mean(values: Sequence[float], trim: float) -> float:
    """Mean of ``values`` without the ``trim`` fraction at each end (at least one value kept)."""
    values = sorted(values)
    k = min(int(trim * len(values)), (len(values) - 1) // 2)
    return statistics.fmean(values[k : len(values) - k])


def _speed_ratio(
    times: dict[str, dict[int, float]], fallback: CostTable, roles: Sequence[str]
) -> float:
    """Median of fitted / calibrated time over the fitted sizes of ``roles`` (1.0 if none)."""
    ratios = [
        t / fallback.base(role, n)
        for role in roles
        if role in fallback.times
        for n, t in times.get(role, {}).items()
        if fallback.base(role, n) > 0
    ]
    return statistics.median(ratios) if ratios else 1.0


def monotone_violations(
    table: dict[int, float],
    stderr: dict[int, float] | None = None,
    tolerance: float = MONOTONE_TOLERANCE,
    sigmas: float = NOISE_SIGMAS,
) -> list[int]:
    """Sizes whose time is more than ``tolerance`` below the largest time of a smaller size (the
    peak) and, when ``stderr`` knows both sizes (fitted means), more than ``sigmas`` combined
    standard errors below it: a drop within the noise of two means is no evidence."""
    return list(drop_peaks(table, stderr, tolerance, sigmas))


def drop_peaks(
    table: dict[int, float],
    stderr: dict[int, float] | None = None,
    tolerance: float = MONOTONE_TOLERANCE,
    sigmas: float = NOISE_SIGMAS,
) -> dict[int, int]:
    """``{n: peak}``: each of ``monotone_violations``'s sizes, with the smaller size it drops
    from (the most expensive one below it)."""
    stderr = stderr or {}
    out: dict[int, int] = {}
    peak, peak_n = 0.0, None
    for n in sorted(table):
        drop = peak - table[n]
        noise = (
            sigmas * (stderr[n] ** 2 + stderr[peak_n] ** 2) ** 0.5
            if n in stderr and peak_n in stderr
            else 0.0
        )
        if peak_n is not None and drop > tolerance * peak and drop > noise:
            out[n] = peak_n
        if table[n] > peak:
            peak, peak_n = table[n], n
    return out


def reproduced_drops(
    table: dict[int, float],
    peaks: dict[int, int],
    witnesses: Sequence[dict[int, float]],
    tolerance: float = SHAPE_TOLERANCE,
) -> list[int]:
    """The drops of ``peaks`` (``drop_peaks`` of ``table``) that every witness reproduces: it
    measured both sizes and its ratio ``w[n] / w[peak]`` is within ``tolerance`` of the table's
    ``table[n] / table[peak]``. ``witnesses`` are measurements of the same sizes taken apart from
    each other (a calibration's ``halves``); without witnesses nothing is reproduced."""

    def ratio(times: dict[int, float], n: int, peak: int) -> float:
        return times[n] / times[peak] if times.get(peak, 0.0) > 0 and n in times else math.nan

    return [
        n
        for n, peak in peaks.items()
        if witnesses
        and all(abs(ratio(w, n, peak) - ratio(table, n, peak)) <= tolerance for w in witnesses)
    ]


def unexplained_violations(fit: dict) -> dict[str, list[int]]:
    """Per role, a fit report's ``monotone_violations`` that are not in its ``kernel_shape`` (a
    report without ``kernel_shape``, from before it was recorded: every violation)."""
    shape = fit.get("kernel_shape") or {}
    return {
        role: [n for n in sizes if n not in shape.get(role, [])]
        for role, sizes in (fit.get("monotone_violations") or {}).items()
    }
