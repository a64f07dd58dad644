"""The eval's warm-up runs the longest prompts still to do, once, unrecorded (``run_dataset``).

Why the longest: a static cache sized to what is used grows, and recaptures its CUDA graphs, on
the first prompt that needs more slots; warmed on the longest, it never does so inside a timed
prompt (a tree sweep warmed on its first prompt timed those captures on an H200).
Deterministic: no false failures.
"""

from __future__ import annotations

from types import SimpleNamespace

from specdec.bench.run.dataset_run import run_dataset
from specdec.data.prompts import Prompt


class FakeRun:
    """What ``run_dataset`` reads of a ``DatasetRun``; ``generated`` lists every generation."""

    def __init__(self, prompts: list[Prompt], done: set[str]) -> None:
        self.cfg = SimpleNamespace(progress=False)
        self.name, self.mine, self.elsewhere = "fake", prompts, frozenset()
        self.ranks = SimpleNamespace(main=True, world=1, tag=None)
        self.rf = SimpleNamespace(done=done, records=[], append=self.rf_append)
        self.generated: list[str] = []

    def rf_append(self, record: dict) -> None:
        self.rf.records.append(record)

    def generate(self, prompt: Prompt) -> str:
        self.generated.append(prompt.id)
        return prompt.id

    def record(self, prompt: Prompt, answer: str) -> dict:
        return {"id": prompt.id, "new_tokens": 4, "decode_s": 1.0, "target_forwards": 2}

    def ordered(self) -> list[dict]:
        return self.rf.records


def prompt(pid: str, *turns: str) -> Prompt:
    return Prompt(id=pid, dataset="fake", category="c", turns=turns)


def test_the_warm_up_runs_the_longest_prompts_still_to_do_once():
    prompts = [
        prompt("short", "hi"),
        prompt("done", "x" * 500),  # recorded already: not warmed, not run
        prompt("two turns", "y" * 60, "z" * 60),  # 120 characters over its turns
        prompt("long", "w" * 100),
        prompt("also short", "yo"),
    ]
    run, warm = FakeRun(prompts, done={"done"}), [2]
    records = run_dataset(run, warm)
    assert run.generated[:2] == ["two turns", "long"]  # the warm-up, longest first
    assert run.generated[2:] == ["short", "two turns", "long", "also short"]  # then in order
    assert [r["id"] for r in records] == run.generated[2:]
    assert warm == [0]  # once per run: the next dataset is not warmed again
    second = FakeRun(prompts, done=set())
    run_dataset(second, warm)
    assert second.generated == [p.id for p in prompts]  # no warm-up left: each prompt once
