"""Training conversations for the domains where drafters accept least: summarization, passage
question answering, retrieval-augmented (RAG) prompts, translation and multi-turn follow-ups.

Built only from registered *training* splits (``sources.training_rows``): the *passages* are the
long reference answers of the Alpaca training pairs (explanatory prose of 600+ characters), never
news articles: the only CNN/DailyMail file at hand (nano-PEARL's 1,000 articles) is likely the hub
test split that ``prepare_data --hub`` evaluates on, so it stays eval-only. Each domain takes its
passages from a disjoint hash bucket (a passage feeds one domain only), and every conversation is
screened by ``leakage.EvalGuard`` (an eval prompt, or any 12-word part of one, never enters).
Deterministic: the same folder gives the same conversations.

- ``summarization``: ``Summarize: <article>`` (the eval's own format).
- ``passage_qa``: an article's first paragraphs, then a question about them.
- ``rag``: 4 passages (one from the article the question is about, 3 retrieved from other
  articles by word overlap with it), then the question on the last line.
- ``translation``: Alpaca instructions that ask for a translation, and article sentences to put
  into German, French or Spanish (the shared data has no German source text).
- ``multi_turn``: an Alpaca instruction, its reference answer as the assistant turn, a follow-up.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from specdec.data.leakage import EvalGuard
from specdec.data.sources import training_rows
from specdec.data.training import hash_text
from specdec.errors import BadInput

DOMAINS = ("summarization", "passage_qa", "rag", "translation", "multi_turn")
Conversation = list[dict[str, str]]
QUESTIONS = (
    "What is the main point of the text above?",
    "Who are the people mentioned above, and what did each of them do?",
    "According to the passage, what happened, and when?",
    "List three facts stated in the text.",
    "Why does the passage say this matters? Answer in two sentences.",
    "What numbers appear in the passage, and what do they refer to?",
)
FOLLOW_UPS = (
    "Make your answer half as long.",
    "Explain that to a ten year old.",
    "Give one concrete example of what you described.",
    "Turn your answer into a short bulleted list.",
    "What could be wrong or missing in your answer?",
    "Rewrite your answer in a formal tone.",
    "Sum up your answer in one sentence.",
)
LANGUAGES = ("German", "French", "Spanish")


def _user(text: str) -> Conversation:
    return [{"role": "user", "content": text}]


MIN_PASSAGE = 600  # characters: shorter answers make poor passages to summarise or ask about


def _articles(source_dir: str | Path) -> list[str]:
    """The passages: Alpaca training answers of at least ``MIN_PASSAGE`` characters, whitespace
    collapsed (the multi-turn domain uses the shorter ones)."""
    rows = training_rows("alpaca", source_dir)
    return [
        re.sub(r"\s+", " ", r.answer).strip()
        for r in rows
        if r.answer and len(r.answer) >= MIN_PASSAGE
    ]


def _paragraphs(article: str, chars: int) -> str:
    """The article's leading sentences, about ``chars`` characters, cut at a sentence end."""
    if len(article) <= chars:
        return article
    cut = article.rfind(". ", 0, chars)
    return article[: cut + 1] if cut > chars // 3 else article[:chars]


def _entity_words(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[A-Za-z]{4,}", text)}


def _rag(gold: int, pool: Sequence[str], words: Sequence[set[str]], k: int, question: str) -> str:
    """``k`` passages (``pool[gold]`` at a hash-chosen slot, the rest the passages of ``pool``
    sharing most ``words`` with it) and the question last."""
    ranked = sorted(
        (i for i in range(len(pool)) if i != gold),
        key=lambda i: (-len(words[gold] & words[i]), hash_text(pool[i])),
    )
    others = [pool[i] for i in ranked[: k - 1]]
    gold_text = pool[gold]
    slot = hash_text(gold_text) % k
    passages = others[:slot] + [gold_text] + others[slot:]
    return "\n".join(passages) + "\n" + question


def _sentences(article: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", article) if 60 <= len(s.strip()) <= 250]


def breadth_conversations(
    source_dir: str | Path, counts: dict[str, int], guard: EvalGuard | None = None
) -> dict[str, list[Conversation]]:
    """Up to ``counts[domain]`` conversations per domain (``DOMAINS``), each ending with a user
    turn; none contains an eval prompt (``guard``, default: the registry's eval files)."""
    unknown = sorted(set(counts) - set(DOMAINS))
    if unknown:
        raise BadInput(f"data_gen.breadth has unknown domains {unknown}; use {list(DOMAINS)}")
    guard = guard or EvalGuard.from_source(source_dir)
    need = [d for d in DOMAINS if counts.get(d)]
    arts = (
        [a for a in _articles(source_dir) if not guard.leaks(a)]
        if {"summarization", "passage_qa", "rag", "translation"} & set(need)
        else []
    )
    # 1. Hash buckets of articles (an article feeds one domain): 3/8 summaries, 2/8 passage QA,
    # 2/8 RAG, 1/8 translation.
    eighths = ("summarization",) * 3 + ("passage_qa",) * 2 + ("rag",) * 2 + ("translation",)
    bucket: dict[str, list[str]] = {d: [] for d in eighths}
    for a in arts:
        bucket[eighths[hash_text(a) % 8]].append(a)
    out: dict[str, list[Conversation]] = {d: [] for d in need}
    # 2. Build each domain's conversations in a stable order.
    for a in bucket["summarization"]:
        out.get("summarization", []).append(_user("Summarize: " + a))
    for a in bucket["passage_qa"]:
        q = QUESTIONS[hash_text(a) % len(QUESTIONS)]
        out.get("passage_qa", []).append(_user(_paragraphs(a, 1500) + "\n\n" + q))
    pool = [_paragraphs(a, 700) for a in bucket["rag"]]
    words = [_entity_words(p) for p in pool]
    for g, p in enumerate(pool):
        q = QUESTIONS[hash_text(p) % len(QUESTIONS)].replace("the text above", "these texts")
        out.get("rag", []).append(_user(_rag(g, pool, words, 4, q)))
    if "translation" in out:
        alpaca = training_rows("alpaca", source_dir)
        out["translation"] += [
            _user(r.turn("\n")) for r in alpaca if re.search(r"\btranslat", r.text, re.I)
        ]
        for a in bucket["translation"]:
            for j, s in enumerate(_sentences(a)[:2]):
                lang = LANGUAGES[(hash_text(s) + j) % len(LANGUAGES)]
                out["translation"].append(_user(f"Translate English to {lang}: {s}"))
    if "multi_turn" in out:
        for r in sorted(training_rows("alpaca", source_dir), key=lambda r: hash_text(r.turn())):
            if r.answer and len(r.answer) < MIN_PASSAGE:
                follow = FOLLOW_UPS[hash_text(r.turn()) % len(FOLLOW_UPS)]
                out["multi_turn"].append(
                    _user(r.turn("\n"))
                    + [
                        {"role": "assistant", "content": r.answer},
                        {"role": "user", "content": follow},
                    ]
                )
    # 3. Screen every turn, drop repeats, keep the first ``count`` in hash order.
    for d, convs in out.items():
        seen, kept = set(), []
        for c in sorted(convs, key=lambda c: hash_text(" ".join(m["content"] for m in c))):
            key = tuple(m["content"] for m in c)
            if key not in seen and not any(guard.leaks(m["content"]) for m in c):
                seen.add(key)
                kept.append(c)
        out[d] = kept[: counts[d]]
    return out
