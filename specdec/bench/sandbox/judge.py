"""Tests judged outside the program's process: the verdict is the supervisor's, not the program's.

In one process, code and its tests share everything: a completion can walk the frames
(``sys._getframe``) or the heap (``gc``) to the sandbox's own end-of-run call and make it, or
return an object equal to everything. With ``TaskTests`` the roles split:

* the **program's process** runs the program (HumanEval: prompt + completion), then ``serve``s
  calls of its entry point: each request on one pipe is a call's arguments, each reply on the
  other its result or the name of the exception it raised (``wire``: plain data only). It
  never sees the tests, holds no token and has no status pipe: nothing it can call or forge
  decides the verdict.
* the **supervisor** (``judge``) reads the tests only after the fork, runs their context and
  code, and calls ``check(candidate)`` with a ``Candidate`` that forwards each call to the
  program's process. The verdict is whether ``check`` returned.

What is left: a completion that computes right answers (possibly by reading test data the
file system shows it) passes; the verdict is as strong as the tests, no longer weaker.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from . import wire

MAX_MESSAGE = 500  # characters of a raised exception's text that cross


class CandidateError(Exception):
    """The program's entry point raised, or its process stopped answering."""


class Candidate:
    """The entry point as ``check`` sees it: each call crosses to the program's process."""

    def __init__(self, name: str, request_w: int, reply_r: int) -> None:
        self.__name__ = name
        self._request_w, self._reply_r = request_w, reply_r

    def __call__(self, *args: object, **kwargs: object) -> object:
        wire.write_frame(
            self._request_w, {"args": wire.encode(list(args)), "kwargs": wire.encode(kwargs)}
        )
        reply = wire.read_frame(self._reply_r)
        if not isinstance(reply, dict):
            raise CandidateError(f"{self.__name__}: the program's process stopped answering")
        if "raised" in reply:
            raise CandidateError(f"{self.__name__} raised {str(reply['raised'])[:MAX_MESSAGE]}")
        return wire.decode(reply.get("value"))


def judge(tests: dict, request_w: int, reply_r: int) -> bool:
    """Run ``tests`` (``TaskTests`` as a dict) against the program's entry point; True: passed.

    Prints the traceback of a failure (it lands in the run's output).
    """
    namespace: dict = {"__name__": "__judge__"}
    candidate = Candidate(tests["entry_point"], request_w, reply_r)
    try:
        exec(compile(tests["context"], "context.py", "exec"), namespace)
        namespace[tests["entry_point"]] = candidate  # some tests call it by name, not candidate
        exec(compile(tests["code"], "tests.py", "exec"), namespace)
        namespace["check"](candidate)
    except BaseException:  # noqa: BLE001 - any end but check's return is a failure
        import traceback

        traceback.print_exc()
        return False
    return True


def serve(function: Callable, request_r: int, reply_w: int, flush: Callable[[], None]) -> None:
    """The program's side: answer calls of ``function`` until the judge closes its pipe."""
    while True:
        # 1. one call's arguments (None: the judge is done)
        request = wire.read_frame(request_r)
        if not isinstance(request, dict):
            return
        # 2. the call, in this process only
        try:
            value = function(*wire.decode(request["args"]), **wire.decode(request["kwargs"]))
            reply = {"value": wire.encode(value, strict=False)}
        except BaseException as e:  # noqa: BLE001 - sys.exit in the function is a failed call
            reply = {"raised": f"{type(e).__name__}: {e}"[:MAX_MESSAGE]}
        flush()
        # 3. the result back
        wire.write_frame(reply_w, reply)


def entry_point(namespace: dict, name: str) -> Callable:
    """The program's function ``name``.

    Raises:
        CandidateError: the program defines no such function.
    """
    function = namespace.get(name)
    if not callable(function):
        print(f"the program defines no function {name!r}", file=sys.stderr)
        raise CandidateError(name)
    return function
