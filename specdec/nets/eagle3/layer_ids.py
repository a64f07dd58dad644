"""What an EAGLE-3 head's auxiliary-layer ids mean in each serving engine, and converting them.

specdec's ``target_layers`` index transformers' ``hidden_states`` of the target: ``0`` is the
input embedding, ``i`` (``1 <= i < L``) the residual stream entering decoder layer ``i`` (= the
one leaving layer ``i - 1``), ``L`` the last layer's output *after* the final norm.

The engines name the same three features by two conventions (read in their sources; no code
copied):

* ``vllm`` -- the config's top-level ``eagle_aux_hidden_state_layer_ids`` (vLLM reads that key
  first; vllm-project/speculators writes it there): id ``i`` is captured *before* target layer
  ``i`` runs, i.e. ``hidden_states[i]``.
* ``sglang`` / ``specforge`` -- ``eagle_config.eagle_aux_hidden_state_layer_ids`` (the only key
  SGLang reads; SpecForge reads and writes it): id ``j`` is the *output* of target layer ``j``
  (SGLang captures before layer ``j + 1``; SpecForge hooks layer ``j``'s output), i.e.
  ``hidden_states[j + 1]``.

An exported head carries both keys, each in its engine's convention (``engine_keys``), so every
engine feeds it the layers it was trained on. A head pinning none gets each engine's default:
``[2, L // 2, L - 3]`` in vLLM's and SGLang's capture, ``[1, L // 2 - 1, L - 4]`` in SpecForge's
output convention: the same three ``hidden_states`` (``default_layers``).

Only ``hidden_states[1 .. L-1]`` can be served: both engines capture the residual stream at a
layer's input inside their layer loop, which never sees the embedding alone (id 0 would add a
missing residual) nor the post-norm output (``servable``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from specdec.errors import BadInput

KEY = "eagle_aux_hidden_state_layer_ids"
ENGINES = ("vllm", "sglang", "specforge")
SHIFT = {"vllm": 0, "sglang": 1, "specforge": 1}  # hidden_states index = engine id + SHIFT


def default_layers(num_layers: int) -> list[int]:
    """The engines' shared default for an ``L``-layer target, as ``hidden_states`` indices:
    ``[2, L // 2, L - 3]``."""
    return [2, num_layers // 2, num_layers - 3]


def to_hidden_states(ids: Sequence[int], engine: str) -> list[int]:
    """``engine``'s layer ids -> indices into transformers' ``hidden_states``."""
    return [int(i) + SHIFT[engine] for i in ids]


def from_hidden_states(layers: Sequence[int], engine: str) -> list[int]:
    """Indices into ``hidden_states`` -> ``engine``'s layer ids."""
    return [int(i) - SHIFT[engine] for i in layers]


def engine_keys(layers: Sequence[int]) -> dict:
    """The config entries pinning ``layers`` (``hidden_states`` indices) for every engine: the
    top-level key in vLLM's convention, ``eagle_config``'s in SGLang's / SpecForge's."""
    return {
        KEY: from_hidden_states(layers, "vllm"),
        "eagle_config": {KEY: from_hidden_states(layers, "sglang"), "use_aux_hidden_state": True},
    }


def unservable(layers: Sequence[int], num_layers: int | None) -> list[int]:
    """The ``hidden_states`` indices of ``layers`` no engine can capture (outside ``1 .. L-1``;
    without ``num_layers`` only those below 1)."""
    top = num_layers - 1 if num_layers is not None else None
    return [int(i) for i in layers if int(i) < 1 or (top is not None and int(i) > top)]


def servable(layers: Sequence[int], num_layers: int | None, fix: str) -> None:
    """Raise ``BadInput`` naming ``fix`` when an engine could not feed ``layers``."""
    bad = unservable(layers, num_layers)
    if bad:
        span = f"1..{num_layers - 1}" if num_layers is not None else "1..L-1"
        raise BadInput(
            f"EAGLE-3 target layers {list(layers)} include {bad}: vLLM and SGLang "
            f"capture only hidden_states {span} (the input of a decoder layer past "
            f"the first), so no engine could feed this head; {fix}"
        )


def pinned(raw: dict, folder: Path) -> list[int] | None:
    """The ``hidden_states`` indices a ``LlamaForCausalLMEagle3`` config pins (None: none).

    The top-level key reads in vLLM's convention, ``eagle_config``'s in SGLang's; a config with
    both must name the same layers in each (else the engines would feed the head different
    features, and ``BadInput`` says which to pass)."""
    top = raw.get(KEY)
    nested = (raw.get("eagle_config") or {}).get(KEY)
    vllm = to_hidden_states(top, "vllm") if top else None
    sglang = to_hidden_states(nested, "sglang") if nested else None
    if vllm is not None and sglang is not None and vllm != sglang:
        raise BadInput(
            f"EAGLE-3 config {folder / 'config.json'}: {KEY} {list(top)} (vLLM: "
            f"hidden_states {vllm}) and eagle_config.{KEY} {list(nested)} (SGLang / "
            f"SpecForge: hidden_states {sglang}) name different target layers; pass "
            f"the ones the head was trained on, e.g. drafter.target_layers={vllm}"
        )
    return vllm if vllm is not None else sglang
