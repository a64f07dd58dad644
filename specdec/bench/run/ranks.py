"""Data-parallel evaluation: the processes of a ``torchrun`` launch and how they meet.

``torchrun --nproc_per_node=N -m specdec.eval ...`` starts N copies of the eval, each with the
environment variables ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK`` (and ``MASTER_ADDR`` /
``MASTER_PORT`` for the rendezvous). ``Ranks.from_env`` reads them (no ``WORLD_SIZE``: one
process, rank 0 of 1, and nothing below does anything). With more than one process:

* ``start`` initialises the default process group (``nccl`` when the eval runs on CUDA, every rank
  on its own GPU ``cuda:<LOCAL_RANK>``; ``gloo`` on CPU) and a ``gloo`` group for the eval's own
  meetings, so that a barrier can time out and name the ranks that never came;
* ``shard`` gives rank ``r`` the prompts ``r, r + N, r + 2N, ...`` of a dataset (round robin by
  index after ``per_category`` and ``limit``): deterministic, so a rerun gives every rank the
  same prompts, and balanced to one prompt;
* ``barrier`` waits for every rank at the end of a dataset, at most ``rank_timeout_s`` seconds
  after this rank arrived. A rank that died or hangs then fails the others with a message naming
  the dataset, instead of a hang; each rank's records are on disk line by line, so a rerun of the
  same command records only the missing prompts (``specdec.bench.run.shards``);
* ``agree`` checks at the start that every rank writes to rank 0's run folder (a ``${now:...}``
  in ``hydra.run.dir`` could differ by a second between ranks);
* ``broadcast`` hands rank 0's summary to every rank, so every rank returns the same sweep metric.

A prompt's record does not depend on which rank answers it: its coins are seeded from (seed, prompt
id) (``specdec.bench.run.method.run_prompt``), and the config hash is computed from the config as
given (``device=cuda``), not from the rank's ``cuda:<LOCAL_RANK>``.
"""

from __future__ import annotations

import datetime
import functools
import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from torch.distributed import ProcessGroup

log = logging.getLogger(__name__)


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(
            f"environment variable {name}={raw!r} is not an integer; it is set by "
            "torchrun (unset it to run one process)"
        ) from None


@dataclass(frozen=True)
class Ranks:
    """This process's place in a data-parallel eval.

    Attributes:
        rank: this process's rank, ``0 <= rank < world``; rank 0 merges and summarises.
        world: the number of processes (1: a plain single-process eval).
        local_rank: the rank on this machine (picks the GPU).
    """

    rank: int = 0
    world: int = 1
    local_rank: int = 0

    def __post_init__(self) -> None:
        if self.world < 1 or not 0 <= self.rank < self.world:
            raise ValueError(
                f"RANK={self.rank} with WORLD_SIZE={self.world}: need "
                "0 <= RANK < WORLD_SIZE (both are set by torchrun)"
            )

    @classmethod
    def from_env(cls) -> Ranks:
        """The ranks ``torchrun`` (or any launcher setting ``RANK``/``WORLD_SIZE``) gave us."""
        world = _env_int("WORLD_SIZE", 1)
        rank = _env_int("RANK", 0)
        return cls(rank=rank, world=world, local_rank=_env_int("LOCAL_RANK", rank))

    @property
    def main(self) -> bool:
        """True on the process that merges records, writes summaries and logs (rank 0)."""
        return self.rank == 0

    @property
    def tag(self) -> str:
        """``rank r/N`` for messages (empty for a single process)."""
        return f"rank {self.rank}/{self.world}" if self.world > 1 else ""

    def shard(self, items: list) -> list:
        """This rank's share of ``items``: every ``world``-th item from index ``rank``."""
        return list(items[self.rank :: self.world])

    def device(self, device: str) -> str:
        """The device this rank loads the pair on, given the config's ``device``.

        Raises:
            ValueError: ``device=cuda:<i>`` with several ranks (all would share one GPU), or
                fewer GPUs than ranks on this machine.
        """
        if self.world == 1 or not device.startswith("cuda"):
            return device
        if device != "cuda":
            raise ValueError(
                f"device={device} with {self.world} processes would put every rank "
                "on one GPU; use device=cuda (rank r then runs on cuda:<LOCAL_RANK>)"
            )
        if self.local_rank >= torch.cuda.device_count():
            raise ValueError(
                f"LOCAL_RANK={self.local_rank} but this machine has "
                f"{torch.cuda.device_count()} CUDA device(s); run torchrun with "
                "--nproc_per_node at most the GPU count"
            )
        return f"cuda:{self.local_rank}"

    def start(self, device: str, timeout_s: float) -> None:
        """Join the process group (once per process; a Hydra multirun calls ``run`` per job)."""
        import torch.distributed as dist

        if self.world == 1 or dist.is_initialized():
            return
        timeout = datetime.timedelta(seconds=timeout_s)
        cuda = device.startswith("cuda")
        if cuda:
            torch.cuda.set_device(self.local_rank)
        dist.init_process_group(
            "nccl" if cuda else "gloo", rank=self.rank, world_size=self.world, timeout=timeout
        )
        if cuda:
            _gloo_group()  # a collective: every rank makes it here, at the same point
        log.info("%s joined the process group (%s)", self.tag, dist.get_backend())

    def _group(self) -> ProcessGroup | None:
        """The gloo group the eval meets in (the default one on CPU; a new one beside nccl)."""
        import torch.distributed as dist

        return None if dist.get_backend() == "gloo" else _gloo_group()

    def barrier(self, what: str, timeout_s: float) -> None:
        """Wait until every rank is here, at most ``timeout_s`` seconds.

        Raises:
            RuntimeError: naming ``what`` and the timeout when a rank did not come (it died, hangs
                or is far slower); its records so far are kept, a rerun completes them.
        """
        if self.world == 1:
            return
        import torch.distributed as dist

        try:
            dist.monitored_barrier(
                group=self._group(),
                wait_all_ranks=True,
                timeout=datetime.timedelta(seconds=timeout_s),
            )
        except RuntimeError as err:
            raise RuntimeError(
                f"{self.tag}: not every rank finished {what} within rank_timeout_s={timeout_s:g} "
                f"s of this one (a rank died, hangs, or is slower: raise rank_timeout_s). Every "
                "record written so far is kept; rerun the same command to record the missing "
                f"prompts. torch.distributed said: {err}"
            ) from err

    def agree(self, value: str, fix: str) -> None:
        """Check that this rank's ``value`` (e.g. its run folder) is rank 0's.

        Raises:
            ValueError: naming both values and ``fix``.
        """
        theirs = self.broadcast(value)
        if theirs != value:
            raise ValueError(f"{self.tag} has {value}, rank 0 has {theirs}; give every rank {fix}")

    def broadcast(self, obj: object) -> object:
        """Rank 0's ``obj`` on every rank (``obj`` elsewhere is ignored)."""
        if self.world == 1:
            return obj
        import torch.distributed as dist

        box = [obj]
        dist.broadcast_object_list(box, src=0, group=self._group())
        return box[0]


@functools.cache
def _gloo_group() -> ProcessGroup:
    """A gloo group of every rank beside an nccl default group (made once, by ``start``):
    ``monitored_barrier`` exists for gloo only, and objects need no GPU to travel."""
    import torch.distributed as dist

    return dist.new_group(backend="gloo")
