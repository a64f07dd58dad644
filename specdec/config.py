"""Config helpers shared by the entry points, the scripts and the tests.

* ``compose_config``: a primary config (``eval`` or ``train``) composed from ``CONF_DIR`` with
  overrides, as the command line would compose it, outside ``@hydra.main`` (the Python API, the
  command-line checks, the scripts and the tests all compose through it).
* ``register_resolvers``: the OmegaConf resolvers ``${specdec_root:}``, ``${specdec_choice:}``,
  ``${specdec_if_exists:}``, ``${specdec_train_hash:}`` (a training run's folder),
  ``${specdec_train_run_name:}`` (its W&B run's name), the three that
  read the model pair for any-pair experiments and drafters -- ``${specdec_pair_name:}``,
  ``${specdec_target_layers:}``, ``${specdec_experiment:<kind>}`` -- and the two that fill the
  ``--help`` templates (``specdec.cli_help``).
* ``target_errors``: torchtune-style static validation (``config/_validate.py``): every mapping
  with a ``_target_`` in a YAML file must name an importable callable whose signature accepts the
  mapping's other keys (``inspect.Signature.bind_partial``: objects may get more arguments at
  instantiation, e.g. ``lm=`` or a ``_partial_`` call). Nothing is built and interpolations
  (``${...}``) are not resolved: they count as present values. Config groups are the only
  registry, so this check covers every selectable component.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Sequence
from pathlib import Path

import yaml
from omegaconf import DictConfig, OmegaConf

from specdec.errors import BadInput, MissingInput
from specdec.paths import CONF_DIR, ROOT

# Hydra's instantiate keywords: not arguments of the target
HYDRA_KEYS = ("_target_", "_partial_", "_recursive_", "_convert_", "_args_")


def compose_config(
    name: str, overrides: Sequence[str] = (), *, hydra_node: bool = True
) -> DictConfig:
    """``conf/<name>.yaml`` composed with ``overrides`` as ``python -m specdec.<name>`` would.

    The resolvers are registered first and Hydra's global state is cleared before and after, so
    calls do not see each other. ``hydra_node`` keeps the ``hydra`` node: the resolvers that read
    the group choices (``${specdec_choice:}``, ``${specdec_pair_name:}``) need it. Hydra's own
    errors propagate; callers that face users turn them into ``BadInput``.
    """
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    register_resolvers()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
            return compose(name, overrides=list(overrides), return_hydra_config=hydra_node)
    finally:
        GlobalHydra.instance().clear()


def register_resolvers() -> None:
    """Register ``${specdec_root:}`` (the repository root; the package is installed editable),
    ``${specdec_choice:<group>}`` (the option chosen for a config group, e.g. the model pair), and
    ``${specdec_options:<group>}`` / ``${specdec_keys:<eval|train>}`` (help text)."""
    if not OmegaConf.has_resolver("specdec_root"):
        OmegaConf.register_new_resolver("specdec_root", lambda: str(ROOT))
    if not OmegaConf.has_resolver("specdec_choice"):
        OmegaConf.register_new_resolver("specdec_choice", _choice)
    if not OmegaConf.has_resolver("specdec_if_exists"):
        OmegaConf.register_new_resolver("specdec_if_exists", if_exists)
    if not OmegaConf.has_resolver("specdec_train_hash"):
        from specdec.learners.resume import hash_resolver  # no Lightning import

        OmegaConf.register_new_resolver("specdec_train_hash", hash_resolver)
    if not OmegaConf.has_resolver("specdec_train_run_name"):
        from specdec.learners.resume import run_name_resolver

        OmegaConf.register_new_resolver("specdec_train_run_name", run_name_resolver)
    for name, resolver in (
        ("specdec_pair_name", pair_label),
        ("specdec_target_layers", target_layers),
        ("specdec_experiment", experiment_for),
        ("specdec_per_device", per_device),
    ):
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, resolver)
    from specdec.cli_help import group_options, primary_keys

    if not OmegaConf.has_resolver("specdec_options"):
        OmegaConf.register_new_resolver("specdec_options", group_options)
    if not OmegaConf.has_resolver("specdec_keys"):
        OmegaConf.register_new_resolver("specdec_keys", primary_keys)


def per_device(device: object, cpu: object, cuda: object) -> object:
    """``${specdec_per_device:${device},<cpu value>,<cuda value>}``: a preset value per device
    type (the CUDA one for ``cuda``, ``cuda:N``; the CPU one elsewhere), so ``device=cuda`` picks
    the GPU defaults (``docs/gpu.md``) and CPU runs resolve, and hash, as before."""
    return cuda if str(device).startswith("cuda") else cpu


def if_exists(path: str) -> str | None:
    """``${specdec_if_exists:<path>}``: the path when it exists, else null (an optional asset,
    e.g. a pair's H-RAD head: ``conf/method/specbranch.yaml``)."""
    return str(path) if Path(path).exists() else None


def _choice(group: str, *, _root_) -> str:
    # Under @hydra.main the choices live in HydraConfig; a compose(return_hydra_config=True)
    # config carries them in its own `hydra` node.
    from hydra.core.hydra_config import HydraConfig

    if HydraConfig.initialized():
        return str(HydraConfig.get().runtime.choices[group])
    choices = OmegaConf.select(_root_, "hydra.runtime.choices")
    if choices is None or group not in choices:
        raise ValueError(
            f"no choice recorded for config group {group!r}; compose the config "
            "through Hydra (return_hydra_config=True) or set the value explicitly"
        )
    return str(choices[group])


def pair_label(*, _root_) -> str:
    """``${specdec_pair_name:}``: the pair's one name in asset folders, trace folders and run
    names -- ``model.name`` when set, else the target's (``models.hf.pair_name``; a hub id's ``/``
    as ``--``), else the ``model`` choice (``tiny``, ``smollm2``)."""
    model = OmegaConf.select(_root_, "model")
    name = model.get("name") if model is not None else None
    if name:
        return str(name)
    target = model.get("target") if model is not None else None
    if target:
        from specdec.models.hf import pair_name

        return pair_name(str(target)).replace("/", "--")
    return _choice("model", _root_=_root_)


def feature_layers(layers: int) -> list[int]:
    """Low / middle / high ``hidden_states`` indices (0: the embeddings) a feature drafter reads
    from a target of ``layers`` layers: EAGLE-3's ``[2, L // 2, L - 3]`` (SmolLM2's 30 layers:
    ``[2, 15, 27]``), shrunk to ``[0, 1, 2]`` on a 2-layer target."""
    if layers < 1:
        raise BadInput(f"a target of {layers} layers has no features to draft from")
    low, middle = min(2, layers // 4), layers // 2
    high = layers - 3 if layers - 3 > middle else layers
    return [low, middle, high]


def target_depth(model: DictConfig) -> int | None:
    """The target's layer count from its pair config without loading weights: the tiny pair's
    ``layers``; a ``target`` folder's or cached hub id's ``config.json``; None when unknown."""
    if "layers" in model and str(model.get("_target_", "")).endswith("tiny_pair"):
        return int(model.layers)
    target = model.get("target") if "target" in model else None
    if not target:
        return None
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(str(target), trust_remote_code=False)
    except (OSError, ValueError) as e:
        raise MissingInput(
            f"model.target={target}: cannot read its config.json ({e}); give a "
            "folder written by save_pretrained or a cached hub id"
        ) from None
    return int(config.get_text_config().num_hidden_layers)


def target_layers(*, _root_) -> list[int]:
    """``${specdec_target_layers:}``: ``feature_layers`` of the target's depth (``target_depth``);
    a preset whose depth is not in its config (SmolLM2's GGUF) sets the list itself."""
    depth = target_depth(OmegaConf.select(_root_, "model"))
    if depth is None:
        raise BadInput(
            "cannot tell the target's layer count from this model config; set the "
            "experiment's target_layers=[low,middle,high] (hidden_states indices)"
        )
    return feature_layers(depth)


def experiment_for(kind: str, *, _root_) -> str:
    """``${specdec_experiment:<kind>}``: what follows ``+experiment=`` to train ``<kind>``'s part
    for this pair -- the preset file ``<kind>_<pair name>`` when one exists, else the generic
    experiment with the pair's own overrides (``eagle3 model=hf model.target=<id|folder>``)."""
    name = pair_label(_root_=_root_)
    if (CONF_DIR / "experiment" / f"{kind}_{name}.yaml").is_file():
        return f"{kind}_{name}"
    try:
        choice = _choice("model", _root_=_root_)
    except (ValueError, KeyError):
        choice = "hf"
    words = [kind, f"model={choice}"]
    model = OmegaConf.select(_root_, "model")
    if choice == "hf" and model is not None:
        from specdec.models.hf import no_draft

        words += [
            f"model.{key}={model[key]}"
            for key in ("target", "draft")
            if key in model and not no_draft(model[key])
        ]
    return " ".join(words)


def target_nodes(node: object, where: str = "") -> Iterator[tuple[str, dict]]:
    """Every mapping with a ``_target_`` in a loaded YAML document, with its dotted key path."""
    if isinstance(node, dict):
        if "_target_" in node:
            yield where or "<root>", node
        for key, value in node.items():
            yield from target_nodes(value, f"{where}.{key}" if where else str(key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from target_nodes(value, f"{where}[{i}]")


def binding_error(node: dict) -> str | None:
    """Why a ``_target_`` mapping does not fit its callable, or ``None`` when it does."""
    from hydra.utils import get_object

    target = node["_target_"]
    try:
        obj = get_object(str(target))
    except (ImportError, ValueError) as e:  # hydra's _locate: not found / not a dotted path
        return f"cannot import _target_ {target!r} ({type(e).__name__}: {e})"
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError) as e:
        return f"cannot read the signature of {target!r} ({e})"
    kwargs = {k: v for k, v in node.items() if k not in HYDRA_KEYS}
    params = sig.parameters
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        named = {
            n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        }
        unknown = [k for k in kwargs if k not in named]
        if unknown:
            return (
                f"{target} takes no argument {', '.join(map(repr, unknown))} "
                f"(it takes: {', '.join(sorted(named)) or 'nothing'})"
            )
    try:
        sig.bind_partial(*node.get("_args_", []), **kwargs)
    except TypeError as e:
        return f"{target}: {e}"
    return None


def config_errors(config: object, source: str) -> list[str]:
    """``<source>: <key path>: <problem>`` for every ``_target_`` of a loaded config that does not
    bind (``config``: the plain container of a YAML file or of an unresolved composed config)."""
    return [
        f"{source}: {where}: {error}"
        for where, node in target_nodes(config)
        if (error := binding_error(node)) is not None
    ]


def target_errors(path: str | Path) -> list[str]:
    """``config_errors`` of one YAML file, read as written (``# @package`` files included)."""
    return config_errors(yaml.safe_load(Path(path).read_text()), str(path))
