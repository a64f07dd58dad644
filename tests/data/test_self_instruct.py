"""Self-instruct prompts (Magpie): the target writes user turns; resumable, eval-free."""

from __future__ import annotations

import json

import pytest

from specdec.data.self_instruct import (
    read_instructions,
    self_instructions,
    user_header,
)
from specdec.models.tiny import tiny_pair

KW = {
    "starters": ["", "Say"],
    "temperature": 1.0,
    "top_p": 1.0,
    "max_new": 300,
    "batch_size": 8,
    "seed": 3,
}


def _source(tmp_path, banned=()):
    src = tmp_path / "src"
    (src / "gsm8k").mkdir(parents=True, exist_ok=True)
    (src / "gsm8k" / "eagle_question.jsonl").write_text(
        "\n".join(json.dumps({"question_id": i, "turns": [t]}) for i, t in enumerate(banned))
    )
    return src


def test_user_header_is_the_templates_text_before_the_user_content():
    tok = tiny_pair().tokenizer
    assert user_header(tok) == "<|im_start|>user\n"
    tok.chat_template = None
    with pytest.raises(ValueError, match="chat template"):
        user_header(tok)


def test_prompts_resume_deduplicate_and_skip_eval_prompts(tmp_path):
    pair = tiny_pair()
    first = self_instructions(pair, tmp_path / "a", count=4, source_dir=_source(tmp_path), **KW)
    assert len(first) == 4 and len(set(first)) == 4
    assert all(16 <= len(t) <= 2000 for t in first)
    # resuming with a larger count keeps the first prompts and continues the batch sequence
    more = self_instructions(pair, tmp_path / "a", count=7, source_dir=_source(tmp_path), **KW)
    assert more[:4] == first and len(more) == 7 and len(set(more)) == 7
    assert read_instructions(tmp_path / "a") == more
    # a fresh run with the same seed reproduces them, except a prompt that is now an eval prompt
    src = _source(tmp_path, banned=[first[1]])
    again = self_instructions(pair, tmp_path / "b", count=4, source_dir=src, **KW)
    assert first[1] not in again
    assert [t for t in first if t != first[1]] == again[:3]


def test_a_grown_prompt_list_regenerates_the_short_last_chunk_and_its_features(tmp_path):
    """Resuming with more prompts must not skip those that fall into a short last chunk."""
    from specdec.data.features import cache_features, load_feature_traces
    from specdec.data.traces import traces_of_file, write_trace_chunks

    pair, out = tiny_pair(), tmp_path / "t"
    texts = [f"prompt number {i} about things" for i in range(7)]
    kw = {"prefix": "traces_self", "max_new": 4, "batch_size": 4}
    write_trace_chunks(pair, out, texts[:5], **kw)  # chunks of 4 and 1 prompts
    cache_features(pair, out, [0, 1])
    last = out / "traces_self_p0_00001.safetensors"
    assert len(traces_of_file(last)) == 1
    first_mtime = (out / "traces_self_p0_00000.safetensors").stat().st_mtime_ns
    write_trace_chunks(pair, out, texts, **kw)  # 7 prompts: the last chunk holds 3 now
    assert len(traces_of_file(last)) == 3
    assert (out / "traces_self_p0_00000.safetensors").stat().st_mtime_ns == first_mtime
    assert cache_features(pair, out, [0, 1]) == 1  # only the rewritten chunk's features
    rows = load_feature_traces(out)
    assert len(rows) == 7 and all(f.shape[0] == tr.ids.numel() for tr, f in rows)
