"""One name per learned part: ``specdec/learners/<name>/``,
``conf/learner/<name>.yaml``, ``conf/experiment/<name>.yaml`` (any pair) and
``<name>_<model>.yaml`` (a model's recipe), ``specdec/assets/<name>/<model>/``."""

from __future__ import annotations

from specdec.paths import CONF_DIR
from specdec.testing.paths import REPO

ROOT = REPO
LEARNERS = sorted(p.stem for p in (CONF_DIR / "learner").glob("*.yaml"))
MODELS = {p.stem for p in (CONF_DIR / "model").glob("*.yaml")}


def test_every_learner_config_has_its_package_and_generic_experiment():
    assert {"eagle3", "specblock", "specdecpp", "hrad", "draft_lm"} <= set(LEARNERS)
    for name in LEARNERS:
        assert (ROOT / "specdec" / "learners" / name / "__init__.py").is_file(), name
        assert (CONF_DIR / "experiment" / f"{name}.yaml").is_file(), name


def test_every_experiment_is_a_learner_or_a_learner_for_a_model():
    for path in (CONF_DIR / "experiment").glob("*.yaml"):
        if path.stem in LEARNERS:
            continue
        learner = next((n for n in LEARNERS if path.stem.startswith(n + "_")), None)
        assert learner is not None, f"{path.name}: name it <learner>_<model>"
        assert path.stem[len(learner) + 1 :] in MODELS, f"{path.name}: no conf/model preset"


def test_every_learner_package_and_asset_folder_is_a_learner_name():
    packages = {p.parent.name for p in (ROOT / "specdec" / "learners").glob("*/__init__.py")}
    assert packages == set(LEARNERS)
    assets = ROOT / "specdec" / "assets"
    for folder in (p for p in assets.iterdir() if p.is_dir() and p.name != "__pycache__"):
        assert folder.name in LEARNERS, folder
        for model in (p for p in folder.iterdir() if p.is_dir()):
            assert model.name in MODELS, model
