"""Config helpers shared by the entry points and the tests.

* ``register_resolvers``: the OmegaConf resolvers ``${specdec_root:}``, ``${specdec_choice:}``,
  ``${specdec_if_exists:}``, ``${specdec_train_hash:}`` (a training run's folder),
  and the two that fill the ``--help`` templates (``specdec.cli_help``).
* ``target_errors``: torchtune-style static validation (``config/_validate.py``): every mapping
  with a ``_target_`` in a YAML file must name an importable callable whose signature accepts the
  mapping's other keys (``inspect.Signature.bind_partial``: objects may get more arguments at
  instantiation, e.g. ``lm=`` or a ``_partial_`` call). Nothing is built and interpolations
  (``${...}``) are not resolved: they count as present values. Config groups are the only
  registry, so this check covers every selectable component.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path

import yaml
from omegaconf import OmegaConf

ROOT = Path(__file__).resolve().parents[1]
# Hydra's instantiate keywords: not arguments of the target
HYDRA_KEYS = ("_target_", "_partial_", "_recursive_", "_convert_", "_args_")


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
    from specdec.cli_help import group_options, primary_keys

    if not OmegaConf.has_resolver("specdec_options"):
        OmegaConf.register_new_resolver("specdec_options", group_options)
    if not OmegaConf.has_resolver("specdec_keys"):
        OmegaConf.register_new_resolver("specdec_keys", primary_keys)


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
        raise ValueError(f"no choice recorded for config group {group!r}; compose the config "
                         "through Hydra (return_hydra_config=True) or set the value explicitly")
    return str(choices[group])


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
        named = {n for n, p in params.items()
                 if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        unknown = [k for k in kwargs if k not in named]
        if unknown:
            return (f"{target} takes no argument {', '.join(map(repr, unknown))} "
                    f"(it takes: {', '.join(sorted(named)) or 'nothing'})")
    try:
        sig.bind_partial(*node.get("_args_", []), **kwargs)
    except TypeError as e:
        return f"{target}: {e}"
    return None


def config_errors(config: object, source: str) -> list[str]:
    """``<source>: <key path>: <problem>`` for every ``_target_`` of a loaded config that does not
    bind (``config``: the plain container of a YAML file or of an unresolved composed config)."""
    return [f"{source}: {where}: {error}" for where, node in target_nodes(config)
            if (error := binding_error(node)) is not None]


def target_errors(path: str | Path) -> list[str]:
    """``config_errors`` of one YAML file, read as written (``# @package`` files included)."""
    return config_errors(yaml.safe_load(Path(path).read_text()), str(path))
