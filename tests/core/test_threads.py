"""Thread budgets: the loop's own work runs on one torch thread, model forwards on the caller's."""

from __future__ import annotations

import threading

import torch

from specdec.core import Context, Draft
from specdec.drafters.model import ModelDrafter
from specdec.drafters.policies import Fixed
from specdec.engine import generate
from specdec.lm import CachedLM
from specdec.models.tiny import tiny_pair
from specdec.sampling import Sampling, TorchCoins
from specdec.threads import forward_threads, loop_threads
from specdec.verifiers import Tokenwise


def _record(lm: CachedLM, seen: list[int]) -> None:
    lm.model.register_forward_hook(lambda *_: seen.append(torch.get_num_threads()))


class _Watching(ModelDrafter):
    """A chain drafter that notes the thread budget its own (non-forward) work runs with."""

    def propose(self, ctx: Context) -> Draft:
        self.seen.append(torch.get_num_threads())
        return super().propose(ctx)


def test_forwards_get_the_callers_threads_and_the_loop_one():
    pair = tiny_pair()
    saved = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        target, draft = CachedLM(pair.target), CachedLM(pair.draft, threads=1)
        in_target, in_draft = [], []
        _record(target, in_target)
        _record(draft, in_draft)
        drafter = _Watching(draft, Fixed(3))
        drafter.seen = []
        generate(
            pair.tokenizer.encode("hello there"),
            target,
            drafter,
            Tokenwise(),
            sampling=Sampling(temperature=0.0),
            coins=TorchCoins(0),
            max_new_tokens=8,
        )
        assert in_target and set(in_target) == {2}  # the caller's budget
        assert in_draft and set(in_draft) == {1}  # the draft's own (model.placement.draft_threads)
        assert drafter.seen and set(drafter.seen) == {1}  # the loop's work
        assert torch.get_num_threads() == 2  # restored
    finally:
        torch.set_num_threads(saved)


def test_budgets_nest_and_are_per_thread():
    saved = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with loop_threads():
            assert (torch.get_num_threads(), forward_threads(None), forward_threads(3)) == (1, 2, 3)
            with loop_threads():  # a nested loop keeps the outermost caller's budget
                assert forward_threads(None) == 2
            other: list[int] = []  # a worker thread has no loop state: its own budget

            def work() -> None:
                torch.set_num_threads(1)  # a worker's own budget (drafters.ahead), not the 2 saved
                other.append(forward_threads(None))
                with loop_threads():
                    other.append(forward_threads(None))

            worker = threading.Thread(target=work)
            worker.start()
            worker.join()
            assert other == [1, 1]
            assert forward_threads(None) == 2  # this thread's state is untouched
        assert torch.get_num_threads() == 2 and forward_threads(None) == 2
    finally:
        torch.set_num_threads(saved)
