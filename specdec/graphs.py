"""GraphRunner: replays a static-cache ``CachedLM``'s bucketed forwards from fixed buffers.

``model.cuda_graphs`` (with ``model.static_cache``): every forward of a bucket size ``B``
(``1, 2, 4, ..., BUCKET_CAP``, ``specdec.static_cache``) gets, once, static input buffers on the
model's device -- ids ``[1, B]`` (or embeddings ``[1, B, H]``), positions ``[1, B]`` and the
additive mask ``[1, 1, B, L]`` -- and static outputs (logits ``[1, B, V]``, and the hidden states
when a feature drafter asks for them: a separate entry). Each step copies its inputs into the
buffers, replays, and copies the real rows out of the static outputs (the next replay overwrites
them). The cache positions are the static cache's own: each ``StaticLayer`` keeps its length in
a device tensor that a forward advances in place (``add_``) and a crop moves back (``sub_``), so
the captured graph reads and writes the right slots without a host-side position.

On CUDA an entry is captured lazily, on its first use: ``warmup`` eager forwards on a side stream
(each one's cache writes undone by cropping its ``B`` slots back: they land past the cache's
length, where nothing reads them), then ``torch.cuda.graph`` records one forward into a
``torch.cuda.CUDAGraph`` sharing one memory pool with the other buckets; every later step of that
bucket is a ``replay()``. Elsewhere (CPU) the "capture" is the same forward called on the static
buffers each step: same fixed addresses, same copy-in / copy-out, so the CPU tests cover all but
the recording itself.

Everything else runs eagerly, counted as a fallback: an unpadded forward (a prefill above the
cap, or padding that did not fit in the cache). ``counts`` holds ``graph_replays`` and
``graph_fallbacks`` (and ``graph_captures``); the engine adds them to a generation's counters,
with the static cache's ``cache_grows``.

A growing static cache (``model.max_cache_len: null``, ``StaticKV.grow``) replaces its tensors,
and the mask's width ``L`` with them: every entry (buffers, outputs, graphs) is then stale. The
runner notices the new cache on its next forward, drops its entries (and, on CUDA, their memory
pool) and captures each bucket again on its next use.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from types import SimpleNamespace

import torch
from transformers import PreTrainedModel

from specdec.cuda_sync import CAPTURE_LOCK
from specdec.static_cache import BUCKET_CAP, StaticKV, bucket, drop_last

REPLAYS, FALLBACKS, CAPTURES = "graph_replays", "graph_fallbacks", "graph_captures"


@dataclass
class Entry:
    """One bucket's static buffers, its static outputs and (on CUDA) its captured graph."""

    inputs: dict[str, torch.Tensor]  # input_ids [1, B] | inputs_embeds [1, B, H], masks, positions
    logits: torch.Tensor | None = None  # [1, B, V], written by every replay
    hidden: tuple[torch.Tensor, ...] | None = None  # each [1, B, H] (with hidden states)
    graph: torch.cuda.CUDAGraph | None = None


class GraphRunner:
    """Per-bucket fixed-address forwards of one model over its ``StaticCache`` (see module).

    Args:
        model: the causal LM; static: its static cache (``static.cache``, re-read after a
            growth); cache_kw: the model's cache keyword.
        capture: record CUDA graphs (``None``: when the model is on CUDA); ``False`` runs the
            fixed-address path eagerly (CPU).
        warmup: eager forwards on a side stream before a bucket's capture.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        static: StaticKV,
        cache_kw: str,
        *,
        capture: bool | None = None,
        warmup: int = 2,
        cap: int = BUCKET_CAP,
    ):
        self.model, self.static, self.cache_kw = model, static, cache_kw
        self.cache = static.cache  # the cache every entry was made over
        self.device = next(model.parameters()).device
        self.capture = self.device.type == "cuda" if capture is None else capture
        if self.capture and self.device.type != "cuda":
            raise ValueError(f"a CUDA-graph capture needs a model on CUDA, not {self.device}")
        self.warmup, self.cap = warmup, cap
        self.entries: dict[tuple[int, str, bool], Entry] = {}
        self.counts: Counter[str] = Counter()
        self.pool = torch.cuda.graph_pool_handle() if self.capture else None

    def forward(
        self, kwargs: dict[str, torch.Tensor], n: int, layers: Sequence[int] = ()
    ) -> SimpleNamespace:
        """The model's output for padded ``kwargs`` (``StaticKV.inputs``) whose first ``n`` rows
        are real: ``logits [1, n, V]`` and, when ``layers`` names some, ``hidden_states`` (a
        tuple over every layer, those in ``layers`` ``[1, n, H]``; a replay leaves the others
        ``None``: no copy kernel for a layer the step does not read), owned by the caller
        (copied out of the static outputs)."""
        hidden = bool(layers)
        if self.static.cache is not self.cache:  # 0. the cache grew: every entry is stale
            self.cache, self.entries = self.static.cache, {}
            self.pool = torch.cuda.graph_pool_handle() if self.capture else None
        kind = "input_ids" if "input_ids" in kwargs else "inputs_embeds"
        size = int(kwargs[kind].shape[1])
        if size > self.cap or size != bucket(size, self.cap):  # 1. unpadded: the eager fallback
            self.counts[FALLBACKS] += 1
            out = self._eager(kwargs, hidden)
            return SimpleNamespace(logits=out.logits[:, :n], hidden_states=out.hidden_states)
        # 2. This bucket's buffers, allocated once; the step's inputs are copied into them.
        key = (size, kind, hidden)
        entry = self.entries.get(key)
        if entry is None:
            entry = self.entries[key] = Entry({k: torch.empty_like(v) for k, v in kwargs.items()})
        for name, value in kwargs.items():
            entry.inputs[name].copy_(value)
        # 3. Replay (capturing first on CUDA), or call the forward on the static buffers.
        if self.capture:
            if entry.graph is None:
                self._record(entry, size, hidden)
            entry.graph.replay()
        else:
            self._run_static(entry, hidden)
        self.counts[REPLAYS] += 1
        # 4. Copy out the real rows: the next replay of this bucket overwrites the outputs.
        logits = entry.logits[:, :n].clone()  # [1, n, V]
        states = None
        if entry.hidden is not None:
            read = {i % len(entry.hidden) for i in layers}
            states = tuple(
                h[:, :n].clone() if j in read else None for j, h in enumerate(entry.hidden)
            )
        return SimpleNamespace(logits=logits, hidden_states=states)

    def addresses(self) -> dict[tuple[int, str, bool], list[int]]:
        """Every entry's static tensors' ``data_ptr`` (inputs, then outputs): fixed until the
        static cache grows."""
        return {key: [t.data_ptr() for t in self._tensors(e)] for key, e in self.entries.items()}

    # --- helpers ----------------------------------------------------------------------------------
    def _eager(self, kwargs: dict[str, torch.Tensor], hidden: bool):
        return self.model(
            **{self.cache_kw: self.cache}, use_cache=True, output_hidden_states=hidden, **kwargs
        )

    def _run_static(self, entry: Entry, hidden: bool) -> None:
        """The CPU path: the forward on the static inputs, its outputs copied into static ones."""
        out = self._eager(entry.inputs, hidden)
        if entry.logits is None:
            entry.logits = torch.empty_like(out.logits)
            if hidden:
                entry.hidden = tuple(torch.empty_like(h) for h in out.hidden_states)
        entry.logits.copy_(out.logits)
        if hidden:
            for dst, src in zip(entry.hidden, out.hidden_states):
                dst.copy_(src)

    def _record(self, entry: Entry, size: int, hidden: bool) -> None:
        """Warm up on a side stream, then capture one forward of this bucket (CUDA only), holding
        ``cuda_sync.CAPTURE_LOCK``: no other thread's capture or device sync meanwhile."""
        with CAPTURE_LOCK:
            self._record_locked(entry, size, hidden)

    def _record_locked(self, entry: Entry, size: int, hidden: bool) -> None:
        main = torch.cuda.current_stream(self.device)
        side = torch.cuda.Stream(self.device)
        side.wait_stream(main)
        with torch.cuda.stream(side):
            for _ in range(self.warmup):
                self._eager(entry.inputs, hidden)
                drop_last(self.cache, size)  # the warm-up's writes lie past the length: undone
        main.wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        # recorded, not run: the cache is as before. thread_local: a drafter's worker thread
        # (pearl, specbranch, ssd) may launch kernels and allocate on its own stream meanwhile
        with torch.cuda.graph(graph, pool=self.pool, capture_error_mode="thread_local"):
            out = self._eager(entry.inputs, hidden)
        entry.graph, entry.logits = graph, out.logits
        entry.hidden = tuple(out.hidden_states) if hidden else None
        self.counts[CAPTURES] += 1

    @staticmethod
    def _tensors(entry: Entry) -> list[torch.Tensor]:
        outs = [] if entry.logits is None else [entry.logits, *(entry.hidden or ())]
        return [*entry.inputs.values(), *outs]


def graph_runner(
    model: PreTrainedModel, static: StaticKV | None, cache_kw: str, graphs: bool | None
) -> GraphRunner | None:
    """A ``CachedLM``'s runner: with a static cache when ``graphs`` (``None``: on CUDA)."""
    on = graphs if graphs is not None else next(model.parameters()).device.type == "cuda"
    return GraphRunner(model, static, cache_kw) if static is not None and on else None


def graph_counts(models: list[object]) -> Counter[str]:
    """The summed ``counts`` of every model's runner and static cache (``cache_grows``; models
    without them count nothing)."""
    total: Counter[str] = Counter()
    for lm in models:
        for part in (getattr(lm, "graphs", None), getattr(lm, "_static", None)):
            if part is not None:
                total.update(part.counts)
    return total
