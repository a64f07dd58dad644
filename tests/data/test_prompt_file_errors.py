"""Prompt files that passed the line check but failed inside ``datasets`` (or were changed by it)
are refused by ``read_prompt_file``, naming the file, the line and the fix, before any model
loads. Before: ``StopIteration`` / "corresponds to no data" for an empty file,
``AttributeError`` for a non-object ``meta``, a lone surrogate silently dropped from a turn (or a
pyarrow error in an id), and an empty turn that aborted the run after the models loaded.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import specdec.bench.run.runner as ev
from specdec.data.prompts import read_prompt_file
from specdec.errors import BadInput
from specdec.testing.eval_cfg import eval_cfg

OK = b'{"id": "a", "turns": ["Hello"]}\n'
CASES = [  # (file bytes, words of the message)
    (b"", "has no prompts (it is empty or only blank lines)"),
    (b"\n  \n\r\n", "has no prompts"),
    (b'{"id": "a", "turns": ["x\\ud800y"]}\n', "line 1: holds a lone UTF-16 surrogate (\\ud800)"),
    (OK + b'{"id": "b\\udc00", "turns": ["x"]}\n', "line 2: holds a lone UTF-16 surrogate"),
    (b'{"id": "a", "turns": ["x"], "meta": [1, 2]}\n', "'meta' must be an object or null"),
    (b'{"id": "a", "turns": ["x"], "meta": "answer"}\n', "'meta' must be an object"),
    (b'{"id": "a", "turns": [""]}\n', "line 1: a turn is empty"),
    (b'{"id": "a", "turns": "   "}\n', "a turn is empty"),
    (OK + b'{"id": "b", "turns": ["x", "\\n"]}\n', "line 2: a turn is empty"),
    (b'{"id": {"n": 1}, "turns": ["x"]}\n', "the id must be a string or an integer"),
    (b'{"id": "a", "turns": ["x"], "category": 3}\n', "'category' must be a string or null"),
    (b'{"id": "a", "turns": ["x"], "reference": {"r": 1}}\n', "'reference' must be a string"),
    (
        OK + b'{"id": "b", "turns": "Hi"}\n\n',
        "line 3: a blank line in a file whose 'turns' is a list on line 1 but a string on line 2",
    ),
    (
        b'{"id": "a", "turns": ["x"], "reference": "r"}\n  \n{"id": "b", "turns": ["x"], '
        b'"reference": ["r"]}\n',
        "line 2: a blank line in a file whose 'reference'",
    ),
]


@pytest.mark.parametrize("data, words", CASES, ids=[c[1][:40] for c in CASES])
def test_bad_prompt_files_name_the_file_line_and_fix(tmp_path, data, words):
    path = tmp_path / "prompts.jsonl"
    path.write_bytes(data)
    with pytest.raises(BadInput) as err:
        read_prompt_file(path, "ds", cache_dir=tmp_path / "cache")
    message = str(err.value)
    assert str(path) in message and words in message
    assert "prepare_data.py" in message or "remove the blank lines" in message  # the fix


def test_good_rows_still_load(tmp_path):
    path = tmp_path / "prompts.jsonl"
    path.write_bytes(
        OK + b'{"question_id": 7, "turns": "Hi", "category": "c", '
        b'"reference": ["r"], "meta": {"answer": 3}}\n'
    )
    prompts = read_prompt_file(path, "ds", cache_dir=tmp_path / "cache").prompts
    # a file mixing id and question_id: datasets gives each row the other key as null, which
    # read as the id "None" before
    assert [(p.id, p.turns, p.category) for p in prompts] == [
        ("a", ("Hello",), "ds"),
        ("7", ("Hi",), "c"),
    ]
    assert prompts[1].reference == "r" and prompts[1].meta == {"answer": "3"}


@pytest.mark.parametrize("data", [b"", b'{"id": "a", "turns": [""]}\n'])
def test_a_bad_prompt_file_stops_the_run_before_the_models_load(tmp_path, monkeypatch, data):
    monkeypatch.setattr(ev, "instantiate", lambda *a, **k: pytest.fail("a model was loaded"))
    path = Path(tmp_path) / "prompts.jsonl"
    path.write_bytes(data)
    with pytest.raises(BadInput, match="prompts.jsonl"):
        ev.run(eval_cfg(tmp_path, ["method=ar", f"benchmark.datasets.tiny.path={path}"]))
