"""Tests judged apart from the program: a completion cannot reach or forge the verdict.

HumanEval's check runs through ``specdec.bench.quality.humaneval_run``: the completed function
in the program's process, ``check`` in the sandbox's supervisor (``specdec.bench.sandbox.judge``).
Each forging completion below passes when the tests share the program's process; here each
must fail, beside a control that the honest completion passes.
"""

from __future__ import annotations

import math

import pytest

from specdec.bench import quality as q
from specdec.bench.sandbox import TaskTests, run_sandboxed, wire

PROMPT = 'def add(a, b):\n    """Return a + b."""\n'
TEST = (
    "def check(candidate):\n    assert candidate(1, 2) == 3\n"
    "    assert candidate(a=-4, b=4) == 0  # tests-only-marker-5e1f\n"
)

# walks its callers' frames and the heap to the sandbox's own end-of-run call and calls it; else
# writes the first token it finds (else "done") to every descriptor, and leaves with status 0
FORGE_FRAMES = """\
    import gc, os, sys
    seen = []
    frame = sys._getframe()
    while frame is not None:
        seen += [frame.f_locals, frame.f_globals]
        frame = frame.f_back
    for value in [s.get("finish") for s in seen] + gc.get_objects():
        if callable(value) and getattr(value, "__name__", None) == "finish":
            value()
    tokens = [v for s in seen for v in s.values() if isinstance(v, bytes) and len(v) == 32]
    for data in tokens[:1] or [b"done\\n"]:
        for fd in range(3, 64):
            try:
                os.write(fd, data)
            except OSError:
                pass
    os._exit(0)
"""
# a result equal to everything
FORGE_EQUAL = """\
    class Yes:
        def __eq__(self, other):
            return True
    return Yes()
"""


def test_a_completion_that_reaches_the_sandboxs_finish_fails():
    assert q.humaneval_run(PROMPT, "    return a + b\n", TEST, "add", timeout_s=5).passed
    forged = q.humaneval_run(PROMPT, FORGE_FRAMES, TEST, "add", timeout_s=5)
    assert not forged.passed, forged
    assert "judge" in forged.layers


def test_a_result_equal_to_everything_fails():
    forged = q.humaneval_run(PROMPT, FORGE_EQUAL, TEST, "add", timeout_s=5)
    assert not forged.passed and "AssertionError" in forged.output, forged


def test_the_programs_process_never_holds_the_tests():
    # the completion searches its callers' frames and the heap for the tests' text, then
    # answers honestly (the marker is built at run time: the program's own text lacks it)
    spy = (
        "    import gc, sys\n    marker, found = 'marker-' + '5e1f', 0\n"
        "    frame, seen = sys._getframe(), list(gc.get_objects())\n"
        "    while frame is not None:\n"
        "        seen.append(frame.f_locals)\n        frame = frame.f_back\n"
        "    for obj in seen:\n"
        "        items = obj.values() if isinstance(obj, dict) else obj if isinstance(\n"
        "            obj, (list, tuple)) else ()\n"
        "        found += sum(isinstance(x, str) and x is not marker and marker in x\n"
        "                     for x in items)\n"
        "    sys.stdout.write(f'found {found}\\n')\n    return a + b\n"
    )
    res = q.humaneval_run(PROMPT, spy, TEST, "add", timeout_s=5)
    assert res.passed and res.output == "found 0\nfound 0\n", res  # one line per call


def test_what_the_program_raises_or_leaves_undefined_fails_the_tests():
    raises = q.humaneval_run(PROMPT, "    raise ValueError('no')\n", TEST, "add", timeout_s=5)
    assert not raises.passed and "add raised ValueError: no" in raises.output
    exits = q.humaneval_run(PROMPT, "    import sys\n    sys.exit(0)\n", TEST, "add", timeout_s=5)
    assert not exits.passed and "SystemExit" in exits.output
    missing = run_sandboxed("x = 1\n", timeout_s=5, tests=TaskTests(TEST, "add"))
    assert not missing.passed and "no function 'add'" in missing.output


def test_the_tests_context_runs_in_the_judge():
    # HumanEval's tests call helpers of the prompt (poly, encode_cyclic): the judge has them
    context = "def twice(x):\n    return 2 * x\n"
    tests = TaskTests("def check(candidate):\n    assert candidate(3) == twice(3)\n", "f", context)
    assert run_sandboxed("def f(x):\n    return x + x\n", timeout_s=5, tests=tests).passed
    assert not run_sandboxed("def f(x):\n    return x\n", timeout_s=5, tests=tests).passed
    # a test that calls the entry point by its name (HumanEval/33) calls the program's, not the
    # context's stub of it
    by_name = TaskTests(
        "def check(candidate):\n    assert f(3) == 6\n", "f", "def f(x):\n    pass\n"
    )
    assert run_sandboxed("def f(x):\n    return x + x\n", timeout_s=5, tests=by_name).passed


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        0,
        -(2**70),
        1.5,
        float("inf"),
        "é",
        b"\x00\xff",
        [1, [2]],
        (1, (2, "3")),
        {1: "a", "b": (2,)},
        {1, 2},
        frozenset({3}),
        1 + 2j,
        ([], (), {}),
    ],
)
def test_values_cross_as_builtins_of_the_same_type(value):
    import json

    back = wire.decode(json.loads(json.dumps(wire.encode(value))))
    assert back == value and type(back) is type(value)


def test_what_cannot_cross_is_refused_or_opaque():
    nan = wire.decode(wire.encode(float("nan")))
    assert isinstance(nan, float) and math.isnan(nan)
    with pytest.raises(TypeError):
        wire.encode(lambda: 1)  # the judge's arguments: only plain data
    opaque = wire.decode(wire.encode(iter([1]), strict=False))  # the program's results
    assert isinstance(opaque, wire.Opaque) and opaque != opaque and opaque != [1]
    for bad in ({"t": "eval", "v": "1"}, {"t": "list"}, [1], {"t": "dict", "v": "x"}):
        with pytest.raises(ValueError):
            wire.decode(bad)
