"""A train loader that a resumed run continues mid-epoch, without repeating or skipping a batch.

Lightning restores the loop position from a checkpoint (global step, epoch, batches done in the
epoch), but a plain ``DataLoader`` restarts its epoch from the first batch, with a new shuffle:
a run killed mid-epoch would see some rows twice and others not at all in that epoch (Lightning
warns "your dataloader is not resumable"). ``make_resumable`` swaps the datamodule's train loader
for a ``ResumableLoader`` over the same dataset:

* its order is a function of ``(seed, epoch)`` (``EpochSampler``; Lightning calls ``set_epoch``
  before each epoch), so the resumed epoch has the order the killed run had;
* it draws its workers' base seed from a generator of its own, seeded by ``(seed, epoch)``, not
  from torch's global one, so a resumed run's fresh pass leaves the global generator where the
  uninterrupted run had it (``rng_state.py`` restores that one);
* it is stateful (``state_dict`` / ``load_state_dict``, which Lightning saves in and restores
  from the checkpoint): it records the batches it handed out in the current epoch, and a restored
  loader skips that many before its next pass. Lightning does not prefetch from a loader with a
  length, so the batches handed out are the batches trained on when a checkpoint is written.

Only the standard loaders are swapped (a ``RandomSampler`` or ``SequentialSampler`` with a
``batch_size``); a custom sampler or batch sampler is left as it is. Under several processes
Lightning's ``DistributedSampler`` already orders each epoch by ``(seed, epoch)``, so
``train.py`` calls ``make_resumable`` in a one-process run only.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader, RandomSampler, Sampler, SequentialSampler


class EpochSampler(Sampler[int]):
    """Indices ``0..n-1``, shuffled by ``(seed, epoch)`` when ``shuffle``; after ``resume_at``
    the pass of that epoch leaves out its first indices (a resumed epoch)."""

    def __init__(self, n: int, *, shuffle: bool, seed: int) -> None:
        self.n, self.shuffle, self.seed = n, shuffle, seed
        self.epoch = 0
        self.started_at = 0  # indices the current pass left out
        self._resume: tuple[int, int] | None = None

    def set_epoch(self, epoch: int) -> None:
        """Called by Lightning before each epoch."""
        self.epoch = epoch

    def resume_at(self, epoch: int, skip: int) -> None:
        """Leave out the first ``skip`` indices of the next pass if it is epoch ``epoch`` (a
        checkpoint written at the end of an epoch resumes with the next one: nothing skipped)."""
        self._resume = (epoch, skip)

    def __len__(self) -> int:
        return self.n  # a full epoch: Lightning counts the resumed epoch's batches itself

    def __iter__(self) -> Iterator[int]:
        # runs at the pass's first batch, after Lightning's set_epoch for that epoch
        resume, self._resume = self._resume, None
        self.started_at = resume[1] if resume is not None and resume[0] == self.epoch else 0
        if self.shuffle:
            gen = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
            order = torch.randperm(self.n, generator=gen).tolist()
        else:
            order = list(range(self.n))
        yield from order[self.started_at :]


class ResumableLoader(DataLoader):
    """A ``DataLoader`` over an ``EpochSampler`` that records its place in the epoch."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.yielded = 0  # batches handed out by the current pass

    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]
        self.yielded = 0
        if self.generator is not None:  # the workers' base seed: a function of (seed, epoch)
            self.generator.manual_seed(self.sampler.seed * 1_000_003 + self.sampler.epoch + 7)
        self.sampler.started_at = 0
        for batch in super().__iter__():
            self.yielded += 1
            yield batch

    def state_dict(self) -> dict[str, int]:
        """Saved in each checkpoint by Lightning (``combined_loader``): the epoch and the batches
        of it trained on (the ones a resumed pass skipped included)."""
        done = self.sampler.started_at // self.batch_size + self.yielded
        return {"epoch": int(self.sampler.epoch), "batches": int(done)}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Restored by Lightning before the resumed epoch's first pass."""
        self.sampler.resume_at(int(state["epoch"]), int(state["batches"]) * self.batch_size)


def resumable_copy(loader: DataLoader, seed: int) -> DataLoader:
    """``loader`` as a ``ResumableLoader`` (same dataset, batch size, collate function and
    workers), or ``loader`` itself when its sampler is not a standard one."""
    if loader.batch_size is None or not isinstance(
        loader.sampler, RandomSampler | SequentialSampler
    ):
        return loader
    sampler = EpochSampler(
        len(loader.dataset), seed=seed, shuffle=isinstance(loader.sampler, RandomSampler)
    )
    return ResumableLoader(
        loader.dataset,
        batch_size=loader.batch_size,
        sampler=sampler,
        collate_fn=loader.collate_fn,
        num_workers=loader.num_workers,
        pin_memory=loader.pin_memory,
        drop_last=loader.drop_last,
        timeout=loader.timeout,
        worker_init_fn=loader.worker_init_fn,
        generator=torch.Generator(),
        persistent_workers=loader.persistent_workers if loader.num_workers else False,
    )


def make_resumable(datamodule: Any, seed: int) -> None:
    """Make ``datamodule.train_dataloader()`` return ``resumable_copy`` of its loader."""
    original = datamodule.train_dataloader

    def train_dataloader() -> DataLoader:
        return resumable_copy(original(), seed)

    datamodule.train_dataloader = train_dataloader
