"""Breadth training conversations (``specdec.data.breadth``) and the eval-leak guard
(``specdec.data.leakage``): no eval prompt, nor any passage of one, reaches training."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specdec.data.breadth import DOMAINS, breadth_conversations
from specdec.data.leakage import EvalGuard
from specdec.data.registry import norm_text
from specdec.data.training import training_prompts
from specdec.testing.paths import REPO

SHARED = REPO.parent / "shared" / "data"
EVAL_ARTICLE = (
    "The council voted on Tuesday to close the old bridge over the river after "
    "engineers found deep cracks in two of its supports. Drivers will use the ring "
    "road until a new crossing opens in the spring of next year, officials said."
)
CLEAN = [
    "A small museum in the hills reopened this week with a collection of old clocks, "
    f"number {i}. Visitors queued for hours. The curator said the oldest clock still "
    "keeps time. Tickets are free for children under twelve. Volunteers restored each case "
    "by hand over two winters, and the town hopes the clocks will bring visitors back to "
    "the high street. A school trip is planned for every class in the spring, with a "
    "workshop on how the oldest movements were made and kept running. The museum's small "
    "café serves soup and bread made in the village, and the gift shop sells postcards of "
    "the collection. Opening hours run from ten until four, every day but Monday."
    for i in range(12)
]


def _folder(root: Path) -> Path:
    (root / "spec_bench").mkdir(parents=True)
    (root / "alpaca").mkdir()
    (root / "gsm8k").mkdir()
    evals = [
        {"question_id": 1, "category": "summarization", "turns": ["Summarize: " + EVAL_ARTICLE]}
    ]
    (root / "spec_bench/question.jsonl").write_text("\n".join(map(json.dumps, evals)) + "\n")
    # the eval article inside a long training answer, re-wrapped: not an exact match
    leaked = (
        " ".join(EVAL_ARTICLE.split()[:20])
        + "\n\n"
        + " ".join(EVAL_ARTICLE.split()[20:])
        + " More rain is expected. "
        + CLEAN[0]
    )
    alpaca = [
        {
            "instruction": "Translate this sentence into French.",
            "input": "I like tea.",
            "output": "J'aime le thé.",
        },
        {"instruction": "Name a colour.", "input": "", "output": "Red."},
        {"instruction": "Write a news story.", "input": "", "output": leaked},
    ]
    alpaca += [
        {"instruction": f"Describe a museum, take {i}.", "input": "", "output": c}
        for i, c in enumerate(CLEAN)
    ]
    (root / "alpaca/train.json").write_text(json.dumps(alpaca))
    (root / "gsm8k/train.jsonl").write_text("")
    return root


def _text(conv: list[dict]) -> str:
    return "\n".join(m["content"] for m in conv)


def test_an_eval_article_inside_a_training_source_never_reaches_any_domain(tmp_path):
    src = _folder(tmp_path)
    out = breadth_conversations(src, {d: 100 for d in DOMAINS})
    texts = [norm_text(_text(c)) for convs in out.values() for c in convs]
    assert not any("old bridge" in t or "ring road" in t for t in texts)
    assert all(out[d] for d in DOMAINS), {d: len(v) for d, v in out.items()}  # the rest is used
    assert [m["role"] for m in out["multi_turn"][0]] == ["user", "assistant", "user"]
    assert any("Translate this sentence into French." in t for t in texts)
    assert any("museum" in t for t in texts)  # the long answers are the passages
    assert len(breadth_conversations(src, {"rag": 2})["rag"]) == 2
    # without the guard's window check the re-wrapped copy would get through
    nothing = EvalGuard([])
    unguarded = breadth_conversations(src, {d: 100 for d in DOMAINS}, guard=nothing)
    assert any("old bridge" in norm_text(_text(c)) for convs in unguarded.values() for c in convs)


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
    evals = [
        t
        for f in sorted((REPO / "data").glob("*/test.jsonl"))
        for line in f.read_text().splitlines()
        if line.strip()
        for t in json.loads(line)["turns"]
    ]
    exact = {" ".join(t.split()) for t in evals}
    windows = set().union(*(_windows(t) for t in evals))
    registered = training_prompts(SHARED, ["gsm8k", "alpaca"])
    breadth = [
        m["content"]
        for convs in breadth_conversations(SHARED, {d: 10**6 for d in DOMAINS}).values()
        for c in convs
        for m in c
    ]
    assert len(registered) > 10000 and len(breadth) > 3000  # both sources are really read
    for text in registered + breadth:
        assert " ".join(text.split()) not in exact, text[:80]
    for text in breadth + [t for t in registered if len(t.split()) >= 150]:
        assert windows.isdisjoint(_windows(text)), text[:80]
