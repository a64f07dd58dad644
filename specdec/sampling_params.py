"""The sampling settings of one generation: temperature, top-k, top-p (vLLM's ``SamplingParams``).

Declared once, here: the eval's ``sampling`` keys are these fields (their ranges in ``metadata``,
read by ``specdec.bench.eval_keys``), the engine hands them to every step in ``Context.sampling``,
and ``specdec.sampling.warp`` applies them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from specdec.errors import BadInput


@dataclass(frozen=True)
class Sampling:
    """Temperature, top-k and top-p of one generation, for target and draft alike; declared only
    here (the eval's ``sampling`` keys and their ranges, ``metadata``, are these fields).

    Attributes:
        temperature: 0 means greedy (one-hot rows).
        top_k: keep the ``top_k`` most likely tokens (0 = off).
        top_p: keep the smallest set with cumulative probability >= ``top_p`` (1.0 = off).
    """

    temperature: float = field(default=0.0, metadata={"ge": 0.0})
    top_k: int = field(default=0, metadata={"ge": 0})
    top_p: float = field(default=1.0, metadata={"gt": 0.0, "le": 1.0})

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise BadInput(f"sampling.temperature must be >= 0, got {self.temperature}")
        if self.top_k < 0:
            raise BadInput(f"sampling.top_k must be >= 0 (0 disables it), got {self.top_k}")
        if not 0.0 < self.top_p <= 1.0:
            raise BadInput(f"sampling.top_p must be in (0, 1] (1 disables it), got {self.top_p}")
