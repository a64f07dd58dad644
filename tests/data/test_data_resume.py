"""The feature drafters' data stage resumes exactly.

A data stage stopped after ``k`` chunks -- cleanly by ``max_minutes`` (a fake clock), or killed
in the middle of a chunk's write -- and rerun, stopped again, and rerun to completion leaves a
folder whose every file is byte-identical to the one an uninterrupted run writes: no trace lost,
none duplicated, no half-written or leftover file. Tiny pair, a tiny prompts folder laid out like
``shared/data`` (``data/training.py``), and the synthetic prompts of ``model=tiny``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specdec.data import features as data_mod
from specdec.data import traces as traces_mod
from specdec.testing.train_data import source_folder

LAYERS = [0, 1, 2]


class Killed(Exception):
    """The injected stop: what a SIGKILL does to the Python code after it."""


@pytest.fixture(scope="module")
def pair():
    from specdec.models.tiny import tiny_pair

    return tiny_pair()


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def run_stage(pair, out: Path, src: Path | None, **extra) -> None:
    if src is None:
        data_mod.make_eagle3_data(
            pair,
            str(out),
            LAYERS,
            feature_batch=3,
            synthetic={"prompts": 10, "max_new": 6, "vocab_map_size": 40, "batch_size": 3},
        )
    else:
        data_mod.make_eagle3_data(
            pair,
            str(out),
            LAYERS,
            source_dir=str(src),
            limit=14,
            max_new=6,
            batch_size=4,
            vocab_map_size=40,
            topk=4,
            feature_batch=3,
            **extra,
        )


def kill_after(monkeypatch, chunks: int, *, mid_write: bool) -> None:
    """Stop the process after ``chunks`` chunk files: before the next chunk's generation, or
    (``mid_write``) halfway through writing it, leaving the partial bytes on disk."""
    done = {"n": 0}
    real_save = traces_mod.save_traces

    def save(path, prompts, conts):
        if done["n"] == chunks:
            if mid_write:
                real_save(path, prompts, conts)
                raw = Path(path).read_bytes()
                Path(path).write_bytes(raw[: len(raw) // 2])
            raise Killed
        done["n"] += 1
        real_save(path, prompts, conts)

    monkeypatch.setattr(traces_mod, "save_traces", save)
    monkeypatch.setattr(data_mod, "save_traces", save)


@pytest.mark.parametrize("source", ["prompts", "synthetic"])
@pytest.mark.parametrize("mid_write", [False, True])
def test_a_killed_data_stage_rerun_twice_writes_the_files_of_one_run(
    pair, tmp_path, source, mid_write
):
    src = source_folder(tmp_path / "src") if source == "prompts" else None
    run_stage(pair, tmp_path / "once", src)
    want = snapshot(tmp_path / "once")
    assert sum(n.startswith("traces") for n in want) == 4  # 4 chunks: two stops fit before
    out = tmp_path / "resumed"
    for _ in range(2):  # killed after 1 chunk, rerun and killed after 1 more
        with pytest.MonkeyPatch.context() as mp:
            kill_after(mp, 1, mid_write=mid_write)
            with pytest.raises(Killed):
                run_stage(pair, out, src)
    run_stage(pair, out, src)
    assert snapshot(out) == want


def test_max_minutes_stops_between_chunks_and_reruns_continue_exactly(pair, tmp_path, monkeypatch):
    """``max_minutes`` with a fake clock that passes a minute per chunk: runs of 1 and 2 chunks,
    then one that finishes, give the one-shot run's files."""
    src = source_folder(tmp_path / "src")
    run_stage(pair, tmp_path / "once", src)
    want = snapshot(tmp_path / "once")

    class Clock:
        """One minute passes with each chunk generated."""

        def __init__(self) -> None:
            self.now = 0.0

        def monotonic(self) -> float:
            return self.now

    clock = Clock()
    real_gen = traces_mod.generate_continuations

    def gen(*args, **kwargs):
        clock.now += 60.0
        return real_gen(*args, **kwargs)

    monkeypatch.setattr(traces_mod, "time", clock)
    monkeypatch.setattr(traces_mod, "generate_continuations", gen)
    out = tmp_path / "resumed"
    for minutes in (0.5, 1.5):  # 1 chunk, then 2 more
        run_stage(pair, out, src, max_minutes=minutes)
        assert len(list(out.glob("traces*.safetensors"))) < 4
    run_stage(pair, out, src)
    assert snapshot(out) == want
