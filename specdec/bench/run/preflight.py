"""Checks of a composed eval config that need no weights: run before the pair loads.

A pair takes seconds to minutes to load; these mistakes are visible in the config alone, so they
fail first, each as one ``InputError`` naming the key and the fix (``specdec.errors``):

0. **Devices** (``specdec.models.placement.check_before_loading``, the run's one device check
   before loading, on ``Placement.from_config(cfg.model)``): the devices named exist, and a
   ``model.placement.draft_device`` is one the drafter can honour.
1. **Model references** (a hub-loaded pair: ``_target_`` one of ``HUB_LOADERS``): ``model.target``
   is set, and it and ``model.draft`` name a model folder or a hub id that can load
   (``specdec.models.hf.check_reference``: offline, an uncached id names ``hf download <id>``).
2. **A draft model for the drafter**: a pair without a draft (its config has ``draft: null`` or
   ``none``) cannot run a drafter that drafts with one. Which drafters do is read from their
   constructor, with no list of method names: a drafter whose ``lm`` parameter has neither a
   default nor ``None`` in its annotation needs a draft model (``EmptyDrafter()``, without
   ``lm``, does not; ``ModelDrafter(lm: LM)`` does).
3. **Trained assets**: every non-null value under ``cfg.drafter`` (the policy included) whose key
   is one of ``ASSET_KEYS`` is a trained asset folder (``specdec/assets/<kind>/<model>``) and must
   exist and hold a ``config.json``; a missing one names the training experiment for this pair
   (the node's ``experiment`` key, else ``config.experiment_for`` of the asset's kind) and says
   when ``conf/experiment/`` has no such experiment.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from specdec.errors import BadInput, InputError, MissingInput
from specdec.models.placement import Placement, check_before_loading
from specdec.paths import CONF_DIR

ASSET_KEYS = ("path", "head", "hrad")  # drafter/policy keys holding a trained asset folder
HUB_LOADERS = (
    "specdec.models.hf.hf_pair",
    "specdec.models.load_pair",
    "specdec.models.pair.load_pair",
)


def preflight(cfg: DictConfig) -> None:
    """Refuse, before any weights load, a pair that cannot load, a drafter without the draft model
    it needs, a device that cannot hold, or a trained asset that is not there (see the module
    docstring)."""
    check_devices(cfg)  # devices that exist, a draft device that holds
    check_references(cfg)
    check_draft_model(cfg)
    check_assets(cfg)


def check_devices(cfg: DictConfig) -> None:
    """``check_before_loading`` on the model config's placement (its ``device`` is the eval's
    ``device``), with the drafter's class (a feature drafter cannot draft away from the
    target)."""
    from hydra.utils import get_class

    target = (cfg.get("drafter") or {}).get("_target_")
    check_before_loading(
        Placement.from_config(cfg.get("model")),
        drafter=get_class(target) if target is not None else None,
    )


def _model_choice(cfg: DictConfig) -> str:
    """The pair's config name (``model=<choice>``) when Hydra recorded it, else its ``name``."""
    choice = OmegaConf.select(cfg, "hydra.runtime.choices.model", default=None)
    if choice is None:
        from hydra.core.hydra_config import HydraConfig

        if HydraConfig.initialized():
            choice = HydraConfig.get().runtime.choices.get("model")
    return str(choice or cfg.model.get("name", None) or "<pair>")


def check_references(cfg: DictConfig) -> None:
    """A hub-loaded pair: ``model.target`` given, and both references loadable."""
    from specdec.models.hf import check_reference, no_draft

    if str(cfg.model.get("_target_", "")) not in HUB_LOADERS:
        return
    if OmegaConf.is_missing(cfg.model, "target") or not cfg.model.target:
        raise BadInput(
            f"model={_model_choice(cfg)} needs the target model: add "
            "model.target=<hub id|folder> (and model.draft=<hub id|folder> for a "
            "draft)"
        )
    check_reference(str(cfg.model.target), "model.target")
    if not no_draft(cfg.model.get("draft", None)):
        check_reference(str(cfg.model.draft), "model.draft")


def needs_draft_model(drafter_target: str) -> bool:
    """Whether the drafter class drafts with a draft model: its ``lm`` parameter has no default
    and its annotation does not admit ``None``."""
    from hydra.utils import get_class

    try:
        params = inspect.signature(get_class(drafter_target)).parameters
    except (ImportError, ValueError, TypeError):  # an unimportable target fails where it builds
        return False
    lm = params.get("lm")
    if lm is None or lm.default is not inspect.Parameter.empty:
        return False
    return "None" not in str(lm.annotation)


def check_draft_model(cfg: DictConfig) -> None:
    """A drafter that needs a draft model, on a pair whose config has none."""
    from specdec.models.hf import no_draft

    if "draft" not in cfg.model or not no_draft(cfg.model.get("draft", None)):
        return
    target = str(cfg.drafter.get("_target_", ""))
    if not needs_draft_model(target):
        return
    choice = _model_choice(cfg)
    method = cfg.get("method_name", None) or target.rsplit(".", 1)[-1]
    raise BadInput(
        f"method {method} drafts with a draft model ({target.rsplit('.', 1)[-1]}), but the pair "
        f"model={choice} has none (model.draft={cfg.model.get('draft', None)}); give it one with "
        f"model.draft=<hub id|folder> sharing the target's tokenizer (conf/model/{choice}.yaml "
        "lists the pair's options), or run a draft-free method such as method=ar"
    )


def _asset_values(node: DictConfig, where: str) -> Iterator[tuple[str, DictConfig, str]]:
    """``(dotted key, owning node, value)`` for every set asset key under ``node``; a value that
    cannot resolve here (an interpolation needing Hydra's runtime) is left to its loader."""
    for key in node:
        try:
            value = node[key]
        except OmegaConfBaseException:
            continue
        if isinstance(value, DictConfig):
            yield from _asset_values(value, f"{where}.{key}")
        elif key in ASSET_KEYS and isinstance(value, str) and value:
            yield f"{where}.{key}", node, value


def _experiment(cfg: DictConfig, key: str, node: DictConfig, folder: Path) -> str:
    """The experiment that trains the asset at ``key`` for this pair: the node's ``experiment``
    key, else ``${specdec_experiment:<kind>}`` (``config.experiment_for``) with the kind the key
    names (``hrad``) or the asset folder's kind (``specdec/assets/<kind>/<pair>``)."""
    from specdec.config import experiment_for

    try:
        experiment = node.get("experiment", None)
    except OmegaConfBaseException:
        experiment = None
    if experiment:
        return str(experiment)
    leaf = key.rsplit(".", 1)[-1]
    kind = leaf if leaf not in ASSET_KEYS[:2] else folder.parent.name
    try:
        return experiment_for(kind, _root_=cfg)
    except Exception:  # no pair name here (composed without Hydra's choices)
        return f"{kind}_{_model_choice(cfg)}"


def _train_hint(cfg: DictConfig, key: str, node: DictConfig, folder: Path) -> str:
    """``train it with `python -m specdec.train +experiment=...``` (or how to write one)."""
    experiment = _experiment(cfg, key, node, folder)
    command = f"`python -m specdec.train +experiment={experiment}`"
    example = CONF_DIR / "experiment" / f"{folder.parent.name}_tiny.yaml"
    after = f" after conf/experiment/{example.name}" if example.is_file() else ""
    # a generic experiment comes with its pair's overrides: "eagle3 model=hf model.target=..."
    name = experiment.split()[0]
    return (
        f"train it with {command}"
        if (CONF_DIR / "experiment" / f"{name}.yaml").is_file()
        else f"no experiment trains it yet (conf/experiment/{name}.yaml does not exist: write "
        f"one{after}, then run {command})"
    )


def check_assets(cfg: DictConfig) -> None:
    """Every trained asset folder the drafter (or its policy) names exists and holds a
    ``config.json`` (or, given as a hub id, is in the offline cache)."""
    from specdec.models.hf import check_reference, looks_like_hub_id

    for key, node, value in _asset_values(cfg.drafter, "drafter"):
        folder = Path(value)
        if folder.is_dir() and (folder / "config.json").is_file():
            continue
        how = _train_hint(cfg, key, node, folder)
        if folder.is_dir():
            raise MissingInput(
                f"{key}={folder} holds no config.json, so it is no trained asset; "
                f"{how}, or point {key}=<folder> at one you trained"
            )
        if folder.exists():
            continue  # a file: its loader says what it expects
        if looks_like_hub_id(value):
            try:
                check_reference(value, key)  # cached offline: the loader reads it
                continue
            except InputError:
                raise MissingInput(
                    f"{key}={value}: neither a folder nor a hub id in the offline cache; a "
                    f"published head: run `hf download {value}` (network needed); else {how}, "
                    f"or point {key}=<folder> at one you trained"
                ) from None
        raise MissingInput(
            f"{key}={folder}: the trained asset is missing; {how}, or point {key}=<folder> at "
            "one you trained"
        )
