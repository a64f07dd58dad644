"""Values between the judge and the program's process: plain data only, in framed JSON.

The judge (trusted tests) calls the program's entry point across a pipe. What crosses is data,
never objects: an argument or a result is encoded as JSON with containers tagged (``{"t":
"tuple", "v": [...]}``), so ``(1, 2)`` stays a tuple and ``{1: 2}`` keeps its int key. The
judge decodes a result into builtin types only: a program cannot hand the tests an object whose
``__eq__`` says yes to everything. A result of another type arrives as ``Opaque`` (equal to
nothing). Integers and floats of other libraries (``numbers.Integral``/``Real``) cross as
``int``/``float``.

A frame is a 4-byte big-endian length, then that many bytes of UTF-8 JSON (at most
``MAX_FRAME``); ``read_frame`` returns None at end of file.
"""

from __future__ import annotations

import json
import numbers
import os
import struct

MAX_FRAME = 8 << 20
TAGS = {list: "list", tuple: "tuple", set: "set", frozenset: "frozenset"}
BUILD = {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}


class Opaque:
    """A result of a type that cannot cross (a generator, an instance): equal to nothing."""

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name

    def __eq__(self, other: object) -> bool:
        return False

    def __hash__(self) -> int:
        return hash(self.type_name)

    def __repr__(self) -> str:
        return f"<{self.type_name} object from the program>"


def encode(value: object, *, strict: bool = True) -> object:
    """``value`` as JSON-ready data; ``strict=False``: other types become an opaque marker.

    Raises:
        TypeError: (``strict``) a value of a type that does not cross.
    """
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, numbers.Complex):
        return {"t": "complex", "v": [value.real, value.imag]}
    if isinstance(value, (bytes, bytearray)):
        return {"t": "bytes", "v": bytes(value).hex()}
    if isinstance(value, dict):
        return {
            "t": "dict",
            "v": [[encode(k, strict=strict), encode(v, strict=strict)] for k, v in value.items()],
        }
    for kind, tag in TAGS.items():
        if isinstance(value, kind):
            return {"t": tag, "v": [encode(x, strict=strict) for x in value]}
    if strict:
        raise TypeError(f"a {type(value).__name__} cannot cross to the sandbox")
    return {"t": "opaque", "v": type(value).__name__}


def decode(data: object) -> object:
    """Builtin values from ``encode``'s data.

    Raises:
        ValueError: data ``encode`` does not make.
    """
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if not isinstance(data, dict) or set(data) != {"t", "v"}:
        raise ValueError(f"not a value: {str(data)[:80]}")
    tag, v = data["t"], data["v"]
    if tag in BUILD and isinstance(v, list):
        return BUILD[tag](decode(x) for x in v)
    if tag == "dict" and isinstance(v, list):
        return {decode(k): decode(x) for k, x in v}
    if tag == "bytes" and isinstance(v, str):
        return bytes.fromhex(v)
    if tag == "complex" and isinstance(v, list) and len(v) == 2:
        return complex(float(v[0]), float(v[1]))
    if tag == "opaque" and isinstance(v, str):
        return Opaque(v[:100])
    raise ValueError(f"unknown tag {str(tag)[:40]}")


def write_frame(fd: int, message: object) -> None:
    """Send ``message`` (JSON-ready) as one frame."""
    body = json.dumps(message).encode()
    data = struct.pack(">I", len(body)) + body
    while data:
        data = data[os.write(fd, data) :]


def _read_exactly(fd: int, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 16))
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_frame(fd: int) -> object | None:
    """The next frame's message; None at end of file.

    Raises:
        ValueError: a frame over ``MAX_FRAME``, cut short, or not JSON.
    """
    head = _read_exactly(fd, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">I", head)
    if size > MAX_FRAME:
        raise ValueError(f"a frame of {size} bytes (at most {MAX_FRAME})")
    body = _read_exactly(fd, size)
    if body is None:
        raise ValueError("the frame was cut short")
    return json.loads(body)
