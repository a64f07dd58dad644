"""Prompt readers: the ``_target_`` of a dataset's ``source.train`` node (``conf/dataset/``) and
of a learner's own prompt sources (``data_gen.sources[].reader``).

A reader is built by ``hydra.utils.instantiate`` and read by ``rows(source_dir, name)``: a list of
``TrainRow`` in file order, ids ``<name>/<file stem>/<row index>`` (stable: learners split by them).
Eval-prompt exclusion is not a reader's business: ``specdec.data.registry.eval_texts`` is applied by
the learner, the same for every reader.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from specdec.data import registry
from specdec.errors import BadInput, MissingInput

TOPICS = ("rivers", "prime numbers", "bread", "the moon", "chess", "volcanoes", "music")


@dataclass(frozen=True)
class TrainRow:
    """One training prompt: its ``text``, an ``extra`` part (Alpaca's ``input``; "" when none)
    and the reference ``answer`` (None when the source has none)."""

    id: str
    text: str
    extra: str = ""
    answer: str | None = None

    def turn(self, sep: str = "\n") -> str:
        """The user turn: ``text``, then ``sep`` and ``extra`` when there is one."""
        return self.text + (sep + self.extra if self.extra else "")


def _records(path: Path) -> list[dict]:
    """``.json``: one list of objects; anything else: JSON lines."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return json.loads(text)
    return [json.loads(line) for line in text.splitlines() if line.strip()]


class JsonRecords:
    """Rows of JSON files under the source folder, one record a prompt.

    Args:
        files: glob patterns relative to the source folder; each pattern's matches in sorted order.
        prompt: the record's key of the prompt text.
        extra: the key of a part appended after a separator (``TrainRow.turn``), or None.
        answer: the key of the reference answer, or None.
    """

    def __init__(
        self, files: Sequence[str], prompt: str, extra: str | None = None, answer: str | None = None
    ) -> None:
        self.files, self.prompt, self.extra, self.answer = list(files), prompt, extra, answer

    def rows(self, source_dir: str | Path, name: str) -> list[TrainRow]:
        src = Path(source_dir)
        paths = [p for pattern in self.files for p in sorted(src.glob(pattern))]
        if not paths:
            raise MissingInput(
                f"training source {name!r}: no {' or '.join(self.files)} under {src}"
            )
        out = []
        for path in paths:
            for i, rec in enumerate(_records(path)):
                out.append(
                    TrainRow(
                        f"{name}/{path.stem}/{i}",
                        rec[self.prompt],
                        (rec.get(self.extra) or "") if self.extra else "",
                        rec.get(self.answer) if self.answer else None,
                    )
                )
        return out


class QuestionFile:
    """The first turn of each row of a question file (Spec-Bench schema: ``question_id``,
    ``turns``); ids ``<name>/<question_id>``. ``path`` is absolute or relative to the source."""

    def __init__(self, path: str) -> None:
        self.path = path

    def rows(self, source_dir: str | Path, name: str) -> list[TrainRow]:
        path = Path(source_dir) / self.path
        if not path.exists():
            raise MissingInput(f"prompt source {name!r}: {path} not found")
        return [TrainRow(f"{name}/{r['question_id']}", r["turns"][0]) for r in _records(path)]


class TopicPrompts:
    """``count`` made-up prompts ("Tell me something about <topic> (#i).") for pairs without
    training data (the tiny pair); ids ``<name>/<i>``."""

    def __init__(self, count: int = 8) -> None:
        self.count = int(count)

    def rows(self, source_dir: str | Path, name: str) -> list[TrainRow]:
        return [
            TrainRow(f"{name}/{i}", f"Tell me something about {TOPICS[i % len(TOPICS)]} (#{i}).")
            for i in range(self.count)
        ]


def training_rows(
    name: str, source_dir: str | Path, conf: str | Path | None = None
) -> list[TrainRow]:
    """The training split of a registered dataset (its ``source.train`` reader)."""
    ds = registry.lookup(name, conf)
    if ds.train is None:
        raise BadInput(
            f"dataset {name!r} has no training split: {ds.file} lacks source.train; "
            f"pick another dataset or add one ({registry.FIX})"
        )
    reader = registry.instantiate_node(ds.train, f"{ds.file}: source.train")
    return reader.rows(source_dir, name)
