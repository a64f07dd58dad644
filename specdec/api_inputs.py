"""What ``Decoder.generate`` accepts, checked before anything runs: the prompt's type and shape,
``seed``, ``prompt_id``, ``max_new_tokens`` and ``stream``.

A prompt is one of: a string (one user turn), chat messages (``[{"role": str, "content": str},
...]``) or token ids (a list of ints, a ``[T]`` / ``[1, T]`` integer tensor or array). Anything
else (bytes, a bare int, ``None``, a batch ``[B, T]`` with ``B > 1``, an empty prompt) raises
``BadInput`` naming the argument and the fix, instead of being read as something else (a batch
flattened into one prompt, bytes read as token ids).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from numbers import Integral

from specdec.errors import BadInput

#: what the prompt argument can be, for the messages
KINDS = "a string, chat messages ([{'role': ..., 'content': ...}]) or token ids (a list of ints)"


def _is_id(value: object) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


def _is_row(value: object) -> bool:
    """Whether ``value`` looks like one prompt's ids (a list, tuple, tensor or array)."""
    if isinstance(value, str | bytes | bytearray | Mapping | Integral):
        return False
    return isinstance(value, Sequence) or bool(getattr(value, "shape", ()))


def _rows(prompt: object) -> list | None:
    """A tensor's or array's ids as a list (``[T]`` or ``[1, T]`` -> ``[T]``); ``None`` if
    ``prompt`` is not one. A ``[B, T]`` batch, more dimensions, a scalar or a float dtype raise."""
    shape = getattr(prompt, "shape", None)
    if shape is None or not hasattr(prompt, "tolist"):
        return None
    shape = tuple(int(s) for s in shape)
    dtype = str(getattr(prompt, "dtype", ""))
    if "int" not in dtype:
        raise BadInput(
            f"prompt is a tensor of dtype {dtype}: token ids are integers "
            "(torch.long); encode text with Decoder.tokenizer or give a string"
        )
    if len(shape) == 0:
        raise BadInput(
            f"prompt is one token id ({prompt.tolist()!r}) as a 0-d tensor: give a "
            f"[T] tensor or a list of ids, e.g. [{prompt.tolist()!r}]"
        )
    if len(shape) == 2 and shape[0] != 1:
        raise BadInput(
            f"prompt is a batch of shape {list(shape)} ([B, T] with B = {shape[0]}): "
            "Decoder.generate answers one prompt; call it once per row "
            "(prompt[i]) or give a [T] / [1, T] tensor"
        )
    if len(shape) > 2:
        raise BadInput(f"prompt has shape {list(shape)}: give token ids as [T] or [1, T]")
    rows = prompt.tolist()
    return rows[0] if len(shape) == 2 else rows


def parse_prompt(prompt: object, vocab: int) -> list[int] | list[dict[str, str]]:
    """``prompt`` as token ids (each in ``[0, vocab)``) or as chat messages (a string is one
    user turn); raises ``BadInput`` for any other value."""
    # 1. Types that are never a prompt, each with its fix.
    if prompt is None:
        raise BadInput(f"prompt is None: give {KINDS}")
    if isinstance(prompt, bytes | bytearray | memoryview):
        raise BadInput(
            "prompt is bytes: decode it to a string first (prompt.decode('utf-8')); "
            "token ids go in a list of ints"
        )
    if isinstance(prompt, Integral):
        raise BadInput(
            f"prompt is one int ({prompt!r}): give token ids as a list, e.g. "
            f"[{prompt!r}], or a string"
        )
    if isinstance(prompt, str):
        if not prompt:
            raise BadInput(f"empty prompt: give {KINDS}")
        return [{"role": "user", "content": prompt}]
    if isinstance(prompt, Mapping):
        raise BadInput(
            "prompt is one chat message (a dict): give a list of messages, e.g. "
            "[{'role': 'user', 'content': ...}]"
        )
    rows = _rows(prompt)
    if rows is None and not isinstance(prompt, Sequence):
        raise BadInput(f"prompt is a {type(prompt).__name__}: give {KINDS}")
    items = list(prompt if rows is None else rows)
    if not items:
        raise BadInput(f"empty prompt: give {KINDS}")
    # 2. Nested: one row of ids ([[...]], as a [1, T] tensor), else a batch of prompts.
    if all(_is_row(i) or isinstance(i, str) for i in items):
        if len(items) == 1 and _is_row(items[0]):
            one = _rows(items[0])
            items = list(items[0]) if one is None else one
        else:
            raise BadInput(
                f"prompt is a batch of {len(items)} prompt(s) (a list of strings or "
                "id lists): Decoder.generate answers one prompt; call it once per "
                "prompt, with a string or a flat list of ids"
            )
    # 3. Token ids, each in the vocabulary.
    if items and all(_is_id(t) for t in items):
        ids = [int(t) for t in items]
        bad = [t for t in ids if not 0 <= t < vocab]
        if bad:
            raise BadInput(
                f"prompt token ids {bad[:5]} are outside the vocabulary [0, {vocab}); "
                "encode the text with Decoder.tokenizer"
            )
        return ids
    if not items:
        raise BadInput(f"empty prompt: give {KINDS}")
    # 4. Chat messages.
    for m in items:
        if not (
            isinstance(m, Mapping)
            and isinstance(m.get("role"), str)
            and isinstance(m.get("content"), str)
        ):
            raise BadInput(
                f"chat message {m!r} is not {{'role': str, 'content': str}}; give "
                f"{KINDS}, not a mix"
            )
    return [dict(m) for m in items]


def check_call(*, max_new_tokens: object, seed: object, prompt_id: object, stream: object) -> None:
    """Refuse ``generate``'s other arguments out of range, each naming the fix."""
    if not _is_id(max_new_tokens) or max_new_tokens < 1:  # type: ignore[operator]
        raise BadInput(f"max_new_tokens must be an integer >= 1, got {max_new_tokens!r}")
    if not _is_id(seed) or seed < 0:  # type: ignore[operator]
        raise BadInput(f"seed must be an integer >= 0 (the eval's seed=), got {seed!r}")
    if not isinstance(prompt_id, str) or not prompt_id:
        raise BadInput(
            f"prompt_id must be a non-empty string (a benchmark prompt's id, or "
            f"'api'), got {prompt_id!r}"
        )
    if not isinstance(stream, bool):
        raise BadInput(f"stream must be True or False, got {stream!r}")
