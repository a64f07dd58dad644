"""Raw code-completion prompts for the feature drafters' data (data.code_prompts)."""

from __future__ import annotations

import gzip
import json

import pytest

from specdec.data.code_prompts import code_prompts, write_code_prompts
from specdec.data.traces import traces_of_file, write_trace_chunks
from specdec.errors import BadInput
from specdec.models.tiny import tiny_pair

DOC = "Return the thing this function computes, described at some length here."


def _tree(tmp_path):
    root = tmp_path / "lib"
    (root / "pkg").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "pkg" / "mod.py").write_text(
        f'def kept(a, b):\n    """{DOC}"""\n    c = a + b\n    return c\n\n\n'
        'def short_doc(a):\n    """Too short."""\n    b = a\n    return b\n\n\n'
        f'def one_statement(a):\n    """{DOC}"""\n    return a\n\n\n'
        f'class Box:\n    @property\n    def method(self):\n        """{DOC}"""\n'
        "        x = 1\n        return x\n\n\n"
        f'def has_close_elements(xs):\n    """{DOC}"""\n    y = xs\n    return y\n'
    )
    (root / "tests" / "test_mod.py").write_text(
        f'def in_tests(a):\n    """{DOC}"""\n    b = a\n    return b\n'
    )
    (root / "broken.py").write_text("def (:\n")
    src = tmp_path / "src" / "humaneval"  # the eval prompts eval_texts reads
    src.mkdir(parents=True)
    row = {"task_id": "HumanEval/0", "prompt": 'def has_close_elements(n):\n    """x"""\n'}
    (src / "HumanEval.jsonl.gz").write_bytes(gzip.compress(json.dumps(row).encode()))
    return root, tmp_path / "src"


def test_documented_functions_become_dedented_header_and_docstring_prompts(tmp_path):
    root, src = _tree(tmp_path)
    rows = code_prompts(10, roots=[root], source_dir=src)
    by_name = {name: (path, text) for path, name, text in rows}
    # kept: a function and a method (dedented, its decorator left out); not the short docstring,
    # the one-statement body, the tests folder, the unparsable file, nor a name eval prompts define
    assert set(by_name) == {"kept", "method"}
    assert by_name["kept"] == ("pkg/mod.py", f'def kept(a, b):\n    """{DOC}"""\n')
    assert by_name["method"][1] == f'def method(self):\n    """{DOC}"""\n'
    assert code_prompts(10, roots=[root], source_dir=src) == rows  # deterministic
    assert code_prompts(1, roots=[root], source_dir=src) == rows[:1]


def test_bad_roots_are_named(tmp_path):
    with pytest.raises(BadInput, match="not a folder"):
        code_prompts(3, roots=[tmp_path / "missing"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(BadInput, match="no documented Python function"):
        code_prompts(3, roots=[tmp_path / "empty"])


def test_the_record_keeps_a_folders_prompts(tmp_path):
    root, src = _tree(tmp_path)
    out = tmp_path / "traces"
    texts = write_code_prompts(out, 2, roots=[root], source_dir=src)
    record = [json.loads(line) for line in (out / "code_prompts.jsonl").read_text().splitlines()]
    assert [r["text"] for r in record] == texts and {r["function"] for r in record} == {
        "kept",
        "method",
    }
    (root / "pkg" / "mod.py").unlink()  # another library now: the recorded prompts stay
    assert write_code_prompts(out, 2, roots=[root], source_dir=src) == texts


def test_code_chunks_are_plain_completion_prompts(tmp_path):
    pair = tiny_pair()
    text = f'def kept(a, b):\n    """{DOC}"""\n'
    write_trace_chunks(
        pair, tmp_path, [text], prefix="traces_code", max_new=3, batch_size=4, chat_template=False
    )
    (trace,) = traces_of_file(tmp_path / "traces_code_p0_00000.safetensors")
    assert trace.ids[: trace.prompt_len].tolist() == pair.tokenizer.encode(text)
    write_trace_chunks(pair, tmp_path, [text], prefix="traces_chat", max_new=3, batch_size=4)
    (chat,) = traces_of_file(tmp_path / "traces_chat_p0_00000.safetensors")
    assert chat.prompt_len > trace.prompt_len  # the template's header and footer
