"""One pair load per process: consecutive eval jobs on the same model config share the loaded pair.

A Hydra multirun runs its jobs one after the other in one process (the basic launcher), and the
default sweep runs four method presets on one pair: without this each job would load the pair
again (minutes for a large target). ``shared_pair`` keeps the last pair it loaded under its
resolved model config and hands it to the next job whose config resolves to the same (the same
loader, weights, dtype, device, kernel); another config frees it before loading its own, so at
most one pair is held.

A job may change its pair in place: ``build_method`` switches flash-attention models to ``sdpa``
for tree methods and notes it in ``pair.info``. Before a reuse the fingerprint (``info``) and
each model's attention implementation are put back as loaded. The weights are not copied: a pair
whose parameters or buffers were written since the load (their version counters moved) is
loaded again. Outside a multirun every call loads its own pair.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from torch import nn

from specdec.bench.run.failures import in_multirun
from specdec.models import ModelPair
from specdec.models.placement import Placement

log = logging.getLogger(__name__)


def _models(pair: ModelPair) -> list[nn.Module]:
    return [m for m in (pair.target, pair.draft) if m is not None]


def _versions(pair: ModelPair) -> int:
    """Sum of the version counters of every parameter and buffer (moves on any in-place write)."""
    return sum(t._version for m in _models(pair) for t in (*m.parameters(), *m.buffers()))


@dataclass
class _Held:
    """The pair last loaded, its config key, and its state right after the load."""

    key: str
    pair: ModelPair
    info: dict[str, str]
    placement: Placement  # frozen: a tree method's attention fallback replaces it on the pair
    attention: list[str | None]  # per model of ``_models``: config._attn_implementation
    versions: int

    @classmethod
    def of(cls, key: str, pair: ModelPair) -> _Held:
        return cls(
            key,
            pair,
            dict(pair.info),
            pair.placement,
            [_attention(m) for m in _models(pair)],
            _versions(pair),
        )

    def restored(self) -> ModelPair | None:
        """The pair as loaded, or None when its weights were written since."""
        if _versions(self.pair) != self.versions:
            return None
        for model, attention in zip(_models(self.pair), self.attention, strict=True):
            if attention is not None and _attention(model) != attention:
                model.set_attn_implementation(attention)
        self.pair.info, self.pair.placement = dict(self.info), self.placement
        return self.pair


def _attention(model: nn.Module) -> str | None:
    return getattr(getattr(model, "config", None), "_attn_implementation", None)


_HELD: list[_Held] = []  # at most one


def config_key(model_cfg: DictConfig) -> str:
    """The resolved model config as sorted JSON (what decides which pair loads)."""
    plain = OmegaConf.to_container(model_cfg, resolve=True)
    return json.dumps(plain, sort_keys=True, default=str)


def shared_pair(model_cfg: DictConfig, *, share: bool | None = None) -> ModelPair:
    """The pair ``model_cfg`` describes: the one this process loaded last when the config
    resolves to the same (restored as loaded), else a fresh load (``instantiate``).

    Args:
        share: keep and reuse pairs (default: inside a Hydra multirun only, so that a single run
            or a test loads its own pair and frees it when done).
    """
    if not (share if share is not None else in_multirun()):
        release()
        return instantiate(model_cfg)
    key = config_key(model_cfg)
    if _HELD and _HELD[0].key == key:
        pair = _HELD[0].restored()
        if pair is not None:
            log.info("model pair %s: reusing the one loaded by an earlier job", pair.name)
            return pair
        log.info("model pair: its weights changed since the load; loading it again")
    _HELD.clear()  # free the previous pair before loading the next
    pair = instantiate(model_cfg)
    _HELD.append(_Held.of(key, pair))
    return pair


def release() -> None:
    """Forget the held pair (its memory is freed once no job refers to it)."""
    _HELD.clear()
