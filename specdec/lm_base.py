"""What a ``CachedLM`` knows of its model apart from the KV cache: shapes, devices, the rows its
input embedding takes, the embedding and output head (read-only), and the clock of a timed forward.

``CachedLM`` (``specdec.lm``) builds on ``LMBase`` and adds the cache; nothing here reads or writes
the cache, so the "only ``lm`` touches the decoding KV cache" rule holds.
"""

from __future__ import annotations

import time

import torch
from transformers import PreTrainedModel

from specdec.cuda_sync import synchronize
from specdec.errors import BadInput
from specdec.forwards import ForwardRecord
from specdec.models.devices import cuda_devices
from specdec.vocab import fit_rows


class LMBase:
    """A transformers causal LM's side of a ``CachedLM``: no cache.

    Args:
        model: a transformers causal LM (batch size 1 is asserted).
        role: ``"target"`` or ``"draft"`` (used in the forward log).
        synchronize: call ``torch.cuda.synchronize()`` around forwards for per-forward timing
            (the eval sets it with ``cost_model=true``: the cost table is fitted on these times;
            CPU timing needs none).
        threads: torch intra-op threads for this model's forwards (``None``: the caller's, or
            the budget a surrounding ``threads.loop_threads`` saved).
        vocab_size: the output vocabulary (default: the rows of the model's output embedding);
            logits are fitted to it (``specdec.vocab.fit_rows``: a draft gets the target's).
    """

    def __init__(
        self,
        model: PreTrainedModel,
        role: str = "target",
        *,
        synchronize: bool = False,
        threads: int | None = None,
        vocab_size: int | None = None,
    ):
        if threads is not None and threads < 1:
            raise BadInput(f"threads must be >= 1 or null, got {threads}")
        self.model = model.eval()
        self.role = role
        self.synchronize = synchronize
        self.threads = threads
        self.vocab_size = int(vocab_size or model.get_output_embeddings().weight.shape[0])
        self.num_layers = int(model.config.num_hidden_layers)
        self.hidden_size = int(model.config.hidden_size)
        self.takes_ids = model.get_input_embeddings() is not None  # else: inputs_embeds only
        # a draft with fewer rows than the target cannot embed the target's padding rows
        rows = model.get_input_embeddings().weight.shape[0] if self.takes_ids else None
        self.input_rows = rows if rows is not None and rows < self.vocab_size else None
        self.device = next(model.parameters()).device  # where inputs go (the first layer's)
        self.cuda_devices = cuda_devices(model)  # what a timed forward synchronises
        self.forward_log: list[ForwardRecord] = []

    @property
    def dtype(self) -> torch.dtype:
        return self.model.dtype

    @torch.inference_mode()
    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """``[N, H]`` input embeddings of ``tokens [N]`` (no cache change, not logged)."""
        return self.model.get_input_embeddings()(tokens.to(self.device))

    @torch.inference_mode()
    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        """``[N, V]`` logits of final hidden states ``hidden [N, H]`` (the output head alone)."""
        return fit_rows(self.model.get_output_embeddings()(hidden.to(self.device)), self.vocab_size)

    def _clock(self) -> float:
        """``time.perf_counter()``, after syncing the model's CUDA devices (``synchronize``)."""
        if self.synchronize:
            for device in self.cuda_devices:
                synchronize(device)  # never during another thread's graph capture
        return time.perf_counter()
