"""The dataset registry (``specdec.data.registry``): ``conf/dataset/<name>.yaml`` is the only list.

A dataset added as one YAML file has its eval prompts excluded from every learner's training data
(draft LM / EAGLE-3 / SpecBlock ``training_prompts``, the acceptance head's and H-RAD's prompts)
with no learner code touched; the exclusion covers at least the files the learners listed before
the registry; the shipped training-prompt order (the drafters' ``limit`` recipes) is pinned; every
benchmark names registered datasets only; bad entries end in one ``error:`` line naming the file.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from specdec.data import registry
from specdec.data.hrad import prompt_texts
from specdec.data.prepare import prepare, recipes
from specdec.data.specdecpp import load_source
from specdec.data.training import training_pairs, training_prompts
from specdec.errors import BadInput, MissingInput
from specdec.paths import CONF_DIR
from specdec.testing.paths import REPO

ROOT = REPO
SHARED = ROOT.parent / "shared" / "data"
# the learners' own lists before the registry (sources.EVAL_FILES and the acceptance head's
# alpaca/eagle_question.jsonl, at 934fe81): the registry's exclusion must cover them
OLD_EVAL_FILES = [
    "gsm8k/eagle_question.jsonl",
    "gsm8k/test.jsonl",
    "alpaca/eagle_question.jsonl",
    "humaneval/eagle_question.jsonl",
    "humaneval/HumanEval.jsonl.gz",
    "mt_bench/question.jsonl",
    "spec_bench/question.jsonl",
    "cnn_dailymail/nano_pearl_CNNDM.jsonl",
]
LEAK_GSM = "Tom has 3 pens and buys 4. How many?"
LEAK_ALPACA = ("Add these.", "2 and 2")
NEW_DATASET = """\
name: mine
split: test
path: ${paths.data_dir}/${.name}/${.split}.jsonl
chat_template: true
template: "{turn}"
max_new_tokens: 32
limit: 2
quality: null
source:
  prepare:
    file: mine/questions.jsonl
    normaliser: {_target_: specdec.data.prepare.norm_question, _partial_: true,
                 default_category: mine}
  eval_files: [mine/questions.jsonl]
"""


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _digest(items: list) -> str:
    return hashlib.sha256(json.dumps(items).encode()).hexdigest()


@pytest.fixture
def shared(tmp_path) -> Path:
    """A folder laid out like shared/data: GSM8K and Alpaca train files, one new eval set whose
    prompts (a GSM8K train question, an Alpaca train instruction + input) leak into training."""
    src = tmp_path / "shared"
    _jsonl(
        src / "gsm8k/train.jsonl",
        [
            {"question": f"Tom has {i} pens and buys {i + 1}. How many?", "answer": str(2 * i + 1)}
            for i in range(5)
        ],
    )
    (src / "alpaca").mkdir()
    (src / "alpaca/train.json").write_text(
        json.dumps(
            [
                {"instruction": "Name a color.", "input": "", "output": "Blue."},
                {"instruction": LEAK_ALPACA[0], "input": LEAK_ALPACA[1], "output": "4"},
            ]
        )
    )
    _jsonl(
        src / "mine/questions.jsonl",  # the eval set's format: blank line before the input
        [
            {"question_id": 1, "category": "mine", "turns": [LEAK_GSM]},
            {"question_id": 2, "category": "mine", "turns": ["\n\n".join(LEAK_ALPACA)]},
        ],
    )
    return src


@pytest.fixture
def conf(tmp_path, monkeypatch) -> Path:
    """The shipped registry plus ``mine.yaml``, selected through ``SPECDEC_DATASET_CONF``."""
    folder = tmp_path / "dataset"
    shutil.copytree(registry.DEFAULT_DIR, folder)
    (folder / "mine.yaml").write_text(NEW_DATASET)
    monkeypatch.setenv(registry.ENV, str(folder))
    return folder


def test_a_new_datasets_prompts_leave_every_learners_training_data(shared, conf, monkeypatch):
    leaked = {LEAK_GSM, "\n".join(LEAK_ALPACA)}
    assert "mine" in registry.datasets() and "mine" in recipes()
    draft = training_prompts(shared)
    hrad = prompt_texts(
        source_dir=str(shared), datasets=["gsm8k", "alpaca"], limit=None, synthetic=None
    )
    acceptance = [t for name in ("gsm8k", "alpaca") for _, t in load_source({"name": name}, shared)]
    pairs = [p for p, _ in training_pairs(shared)]
    assert len(draft) == len(hrad) == len(pairs) == 5 and len(acceptance) == 5
    for texts in (draft, hrad, pairs, [t.replace("\n\n", "\n") for t in acceptance]):
        assert not leaked & set(texts)
    monkeypatch.delenv(registry.ENV)  # the shipped registry: the same prompts are kept
    assert leaked <= set(training_prompts(shared))
    assert "\n\n".join(LEAK_ALPACA) in [t for _, t in load_source({"name": "alpaca"}, shared)]


def test_a_new_dataset_prepares_and_a_new_training_source_is_one_yaml_node(shared, conf, tmp_path):
    written = prepare(tmp_path / "data", source=shared, names=["mine"])
    rows = [json.loads(x) for x in written["mine"].read_text().splitlines()]
    assert [r["id"] for r in rows] == ["1", "2"] and rows[0]["turns"] == [LEAK_GSM]
    entry = yaml.safe_load(NEW_DATASET)
    entry["source"]["train"] = {
        "_target_": "specdec.data.sources.JsonRecords",
        "files": ["mine/extra*.jsonl"],
        "prompt": "q",
        "answer": "a",
    }
    (conf / "mine.yaml").write_text(yaml.safe_dump(entry))
    _jsonl(
        shared / "mine/extra_1.jsonl",
        [{"q": "Why is the sky blue?", "a": "Air."}, {"q": LEAK_GSM, "a": "7"}],
    )
    assert training_prompts(shared, ["mine"]) == ["Why is the sky blue?"]
    assert load_source({"name": "mine"}, shared) == [("mine/extra_1/0", "Why is the sky blue?")]
    # a learner's own prompt source is a reader node too, excluded alike
    reader = {"_target_": "specdec.data.sources.QuestionFile", "path": "mine/questions.jsonl"}
    assert load_source({"name": "q", "reader": reader}, shared) == []
    topics = {"_target_": "specdec.data.sources.TopicPrompts", "count": 2}
    assert [i for i, _ in load_source({"name": "t", "reader": topics}, shared)] == ["t/0", "t/1"]


def test_the_registry_covers_the_learners_old_exclusion_lists():
    assert set(OLD_EVAL_FILES) <= set(registry.eval_files())
    if not SHARED.is_dir():
        pytest.skip("no shared/data beside the clone: the texts are not compared")
    old = set()
    for rel in OLD_EVAL_FILES:
        old |= {registry.norm_text(t) for t in registry.file_turns(SHARED / rel)}
    assert old <= registry.eval_texts(SHARED)


@pytest.mark.skipif(not SHARED.is_dir(), reason="no shared/data beside the clone")
def test_training_prompts_of_the_shared_data_are_pinned():
    """The shipped drafters' recipes take the first chunks of this list (``limit: 2064``): its
    content and order at 934fe81, before the registry, hashed."""
    prompts = training_prompts(SHARED)
    assert len(prompts) == 10410
    assert _digest(prompts) == "4de807c6f29407ab80f6b1226e87dc285a7b6b1a2ce305af3d354ce8fe111eda"
    assert (
        _digest(prompts[:2064])
        == "04dcea6890c3a27475c973cdcd6fd461012688197a1eab9c256677c6e3393894"
    )
    alpaca = load_source({"name": "alpaca", "limit": 150}, SHARED)  # specdecpp.yaml's sources
    assert (
        _digest([list(p) for p in alpaca])
        == "fbab45b24f1422e069dbbe9110faf39c54d1240fed52d3f54a7a2c28ab443015"
    )


def test_every_benchmark_names_registered_datasets_and_every_dataset_prepares():
    names = set(registry.datasets())
    for path in sorted((CONF_DIR / "benchmark").glob("*.yaml")):
        for item in yaml.safe_load(path.read_text()).get("defaults", []):
            if isinstance(item, dict):
                ((group, choice),) = item.items()
                assert group.startswith("/dataset@") and choice in names, (path.name, item)
    for name, ds in registry.datasets().items():
        if ds.prepare is None:  # shipped with the project (tiny): its file is in the repository
            assert "${paths.root_dir}" in yaml.safe_load(ds.file.read_text())["path"], name
            continue
        for node in (ds.prepare, ds.hub):
            if node is not None:
                assert callable(registry.instantiate_node(node["normaliser"], name))
        assert ds.prepare["file"] in ds.eval_files, f"{name}: its eval prompts are not excluded"
        if SHARED.is_dir():
            assert (SHARED / ds.prepare["file"]).exists(), name


def test_bad_registry_input_names_the_file_and_the_fix(shared, conf, tmp_path):
    with pytest.raises(BadInput, match=r"unknown dataset 'nope'.*nope\.yaml.*choose from"):
        training_prompts(shared, ["nope"])
    with pytest.raises(BadInput, match=r"'humaneval' has no training split.*source\.train"):
        training_prompts(shared, ["humaneval"])
    with pytest.raises(BadInput, match=r"source 'x' reader.*specdec\.data\.sources\.Nope"):
        load_source({"name": "x", "reader": {"_target_": "specdec.data.sources.Nope"}}, shared)
    (shared / "mine/questions.jsonl").unlink()
    with pytest.raises(MissingInput, match=r"mine needs mine/questions\.jsonl.*mine\.yaml"):
        prepare(tmp_path / "d", source=shared, names=["mine"])
    with pytest.raises(MissingInput, match=r"no gsm8k/train\.jsonl under .*train_data_dir"):
        training_prompts(tmp_path / "empty")
    (conf / "mine.yaml").write_text(
        NEW_DATASET.replace("prepare.norm_question", "prepare.no_such_normaliser")
    )
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts/prepare_data.py"),
            "--source",
            str(shared),
            "--out",
            str(tmp_path / "d"),
            "--datasets",
            "mine",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert (
        proc.stderr.startswith(f"error: {conf / 'mine.yaml'}")
        and "no_such_normaliser" in proc.stderr
    )
    (conf / "mine.yaml").write_text(NEW_DATASET.replace("  eval_files", "  evals"))
    with pytest.raises(BadInput, match=r"mine\.yaml: source has unknown keys \['evals'\]"):
        registry.datasets()


def _lists(node: object, key: str) -> list[list]:
    """Every list under ``key`` in a loaded YAML document."""
    if isinstance(node, dict):
        return [v for k, v in node.items() if k == key and isinstance(v, list)] + [
            x for v in node.values() for x in _lists(v, key)
        ]
    return [x for v in node for x in _lists(v, key)] if isinstance(node, list) else []


def test_every_learner_config_reads_registered_training_splits():
    from specdec.data.specdecpp import NAMED_READERS

    trains = {name for name, ds in registry.datasets().items() if ds.train is not None}
    for group in ("experiment", "data_gen"):
        for path in sorted((CONF_DIR / group).glob("*.yaml")):
            doc = yaml.safe_load(path.read_text())
            for names in _lists(doc, "datasets"):
                assert set(names) <= trains, (path.name, names)
            for sources in _lists(doc, "sources"):
                for s in sources:
                    assert "reader" in s or s["name"] in trains | set(NAMED_READERS), path.name
