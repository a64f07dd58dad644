"""Breadth training conversations (``specdec.data.breadth``) and the eval-leak guard
(``specdec.data.leakage``): no eval prompt, nor any passage of one, reaches training."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specdec.data.breadth import DOMAINS, breadth_conversations
from specdec.data.registry import eval_texts, norm_text
from specdec.data.training import training_prompts
from specdec.testing.paths import REPO

SHARED = REPO.parent / "shared" / "data"
EVAL_ARTICLE = ("The council voted on Tuesday to close the old bridge over the river after "
                "engineers found deep cracks in two of its supports. Drivers will use the ring "
                "road until a new crossing opens in the spring of next year, officials said.")
CLEAN = ["A small museum in the hills reopened this week with a collection of old clocks, "
         f"number {i}. Visitors queued for hours. The curator said the oldest clock still "
         "keeps time. Tickets are free for children under twelve." for i in range(12)]


def _folder(root: Path) -> Path:
    (root / "spec_bench").mkdir(parents=True)
    (root / "cnn_dailymail").mkdir()
    (root / "alpaca").mkdir()
    (root / "gsm8k").mkdir()
    evals = [{"question_id": 1, "category": "summarization", "turns": ["Summarize: " +
                                                                      EVAL_ARTICLE]}]
    (root / "spec_bench/question.jsonl").write_text("\n".join(map(json.dumps, evals)) + "\n")
    # the eval article again, re-wrapped and with one more sentence: not an exact match
    arts = [" ".join(EVAL_ARTICLE.split()[:20]) + "\n\n" + " ".join(EVAL_ARTICLE.split()[20:])
            + " More rain is expected."] + CLEAN
    rows = [{"question_id": i, "turns": ["Summarize: " + a]} for i, a in enumerate(arts)]
    (root / "cnn_dailymail/nano_pearl_CNNDM.jsonl").write_text(
        "\n".join(map(json.dumps, rows)) + "\n")
    alpaca = [{"instruction": "Translate this sentence into French.", "input": "I like tea.",
               "output": "J'aime le thé."},
              {"instruction": "Name a colour.", "input": "", "output": "Red."}]
    (root / "alpaca/train.json").write_text(json.dumps(alpaca))
    (root / "gsm8k/train.jsonl").write_text("")
    return root


def _text(conv: list[dict]) -> str:
    return "\n".join(m["content"] for m in conv)


def test_an_eval_article_inside_a_training_source_never_reaches_any_domain(tmp_path):
    src = _folder(tmp_path)
    leaked = " ".join(EVAL_ARTICLE.split()[:20])
    # exact matching alone would let the re-wrapped copy through
    assert any(leaked in norm_text(t) and norm_text(t) not in eval_texts(src)
               for t in training_prompts(src, ["cnndm"]))
    out = breadth_conversations(src, {d: 100 for d in DOMAINS})
    texts = [norm_text(_text(c)) for convs in out.values() for c in convs]
    assert not any("old bridge" in t or "ring road" in t for t in texts)
    assert all(out[d] for d in DOMAINS), {d: len(v) for d, v in out.items()}  # the rest is used
    assert [m["role"] for m in out["multi_turn"][0]] == ["user", "assistant", "user"]
    assert any("Translate this sentence into French." in t for t in texts)
    assert len(breadth_conversations(src, {"rag": 2})["rag"]) == 2


def _windows(text: str, n: int = 12) -> set[str]:
    w = " ".join(text.split()).lower().split()
    return {" ".join(w[i : i + n]) for i in range(len(w) - n + 1)}


@pytest.mark.slow
@pytest.mark.skipif(not SHARED.is_dir(), reason="no shared/data beside the clone")
def test_no_eval_prompt_or_passage_of_any_shipped_split_reaches_training():
    """Every turn of every ``data/*/test.jsonl`` (every dataset, every Spec-Bench category) against
    every training source: no training turn equals one; no breadth turn and no registered
    training prompt of 150+ words (an article) shares a 12-word window with one (an eval prompt's
    article or passage inside it). Shorter registered prompts are compared whole: the pinned
    GSM8K/Alpaca list holds 5 template-alike questions that share a window with a test question."""
    evals = [t for f in sorted((REPO / "data").glob("*/test.jsonl"))
             for line in f.read_text().splitlines() if line.strip()
             for t in json.loads(line)["turns"]]
    exact = {" ".join(t.split()) for t in evals}
    windows = set().union(*(_windows(t) for t in evals))
    registered = training_prompts(SHARED, ["gsm8k", "alpaca", "cnndm"])
    breadth = [m["content"] for convs in breadth_conversations(
        SHARED, {d: 10**6 for d in DOMAINS}).values() for c in convs for m in c]
    assert len(registered) > 10000 and len(breadth) > 5000
    for text in registered + breadth:
        assert " ".join(text.split()) not in exact, text[:80]
    for text in breadth + [t for t in registered if len(t.split()) >= 150]:
        assert windows.isdisjoint(_windows(text)), text[:80]
