"""Schema of the component groups (``model``, ``drafter``, ``drafter.policy``, ``verifier``),
checked with the eval's own keys (``schema.validate``) before any model loads.

A component is built by Hydra from its group node, so a bad value there used to surface as a
``TypeError`` from inside the constructor (``drafter.policy.gamma=abc``: ``'<' not supported``)
or, for the pair, after the models loaded. ``check_components`` checks from the composed config:

* every key of a group node is an argument of its ``_target_`` (``config.binding_error``), and
  its value fits the argument's annotation (``values.check_value``: int, float, bool, str, None,
  ``Literal``, lists of these);
* the pair's ``placement:`` node, shared by every pair loader (``Placement.from_config``: no flat
  placement key left in ``model``, no unknown key, values of the node's types, a known dtype
  and kernel, devices torch can parse): ``device`` and ``model.placement.draft_device`` name no
  CPU index but 0 (torch accepts ``cpu:1`` and places the tensors on the one CPU device, so the
  run would not be where it says); ``model.placement.draft_device`` holds weights (``meta``
  holds none; ``device=meta`` is left to ``checks.check_where_loaded``, which its tests use as a
  device a loader may ignore); ``model.placement.draft_threads`` is within the CPU cores this
  process may use. Whether this machine has the devices is the preflight's check;
* a drafter class that makes trees is paired with a verifier class that takes them (class
  attributes ``makes_trees`` / ``supports_trees``; the engine checks the built objects again).

Ranges that depend on one component (``gamma >= 1``, a threshold in [0, 1]) stay in its
constructor, which raises ``BadInput`` naming the key; sizes bounded by the vocabulary wait for
the drafter's constructor too (``specdec.drafters.limits``), still before anything is allocated.
"""

from __future__ import annotations

import inspect
import typing

from omegaconf import DictConfig, ListConfig, OmegaConf

from specdec.bench.run.values import check_value, checkable
from specdec.config import HYDRA_KEYS, binding_error
from specdec.drafters import ahead
from specdec.errors import BadInput
from specdec.paths import CONF_DIR

GROUPS = ("model", "drafter", "drafter.policy", "verifier")


def _target(key: str, node: DictConfig) -> object:
    from hydra.utils import get_object

    try:
        return get_object(str(node._target_))
    except (ImportError, ValueError) as err:
        group = key.replace(".", "/")
        raise BadInput(
            f"{key}._target_={node._target_!r} cannot be imported ({err}); pick the "
            f"component with its config group ({group}=<name>)"
        ) from None


def _hints(obj: object) -> dict[str, object]:
    """The constructor's annotations (an unresolvable one leaves the check to the constructor)."""
    try:
        return typing.get_type_hints(obj.__init__ if inspect.isclass(obj) else obj)
    except Exception:
        return {}


def _plain(node: DictConfig, name: str) -> tuple[bool, object]:
    """``(True, value)`` with interpolations resolved, or ``(False, None)`` when it does not
    resolve here (a ``${specdec_choice:...}`` outside Hydra): the constructor then gets it."""
    try:
        value = node[name]
    except Exception:
        return False, None
    if isinstance(value, DictConfig | ListConfig):
        try:
            value = OmegaConf.to_container(value, resolve=True)
        except Exception:
            return False, None
    return True, value


def check_arguments(key: str, node: DictConfig) -> None:
    """Refuse a key its ``_target_`` does not take or a value its annotation rules out."""
    obj = _target(key, node)
    error = binding_error(OmegaConf.to_container(node, resolve=False))
    if error is not None:
        raise BadInput(f"{key}: {error}; remove the key or pick another {key} preset")
    hints = _hints(obj)
    for name in node:
        name = str(name)
        if name in HYDRA_KEYS or name not in hints or not checkable(hints[name]):
            continue
        ok, value = _plain(node, name)
        if ok and not (isinstance(value, dict) and "_target_" in value):
            check_value(f"{key}.{name}", value, hints[name])


def check_cpu_index(key: str, device: object) -> None:
    """``cpu`` or ``cpu:0``: torch has one CPU device, and ``cpu:1`` tensors land on it."""
    import torch

    try:
        dev = torch.device(str(device))
    except (RuntimeError, TypeError):  # not a device at all: check_device names it
        return
    if dev.type == "cpu" and dev.index not in (None, 0):
        raise BadInput(
            f"{key}={device}: torch has one CPU device (cpu, or cpu:0), so {device} "
            f"would run on it while the records say {device}; use {key}=cpu (a "
            "draft's own CPU threads: model.placement.draft_threads=N) or cuda[:i] for "
            "a GPU"
        )


def check_model_keys(model: DictConfig) -> None:
    """The ``placement:`` node every pair loader takes (see the module docstring)."""
    from specdec.models.placement import Placement
    from specdec.models.placement_config import PlacementKeys, key_name, node_of

    node = node_of(model)  # a flat key names its new one, an unknown key is refused
    hints = typing.get_type_hints(PlacementKeys)
    for name, value in node.items():
        if checkable(hints[name]):
            check_value(key_name(name), value, hints[name])
    asked = Placement.from_config(node)  # a device torch cannot parse, a dtype, a kernel
    check_cpu_index(key_name("device"), node["device"])
    draft, key = node["draft_device"], key_name("draft_device")
    if draft is not None:
        check_cpu_index(key, draft)
        if asked.draft_device.type == "meta":
            raise BadInput(
                f"{key}=meta holds no weights (a meta tensor has no data), so the "
                "model could not run; use cpu, cuda[:i] or mps"
            )
    threads, cores = node["draft_threads"], ahead.machine_cores()
    if isinstance(threads, int) and threads > cores:
        raise BadInput(
            f"{key_name('draft_threads')}={threads} exceeds the {cores} CPU cores this "
            f"process may use; set at most {cores} (or null: the process's torch "
            "threads)"
        )


def tree_verifiers() -> list[str]:
    """The ``conf/verifier/`` options whose class takes trees."""
    import yaml
    from hydra.utils import get_object

    out = []
    for path in sorted((CONF_DIR / "verifier").glob("*.yaml")):
        target = (yaml.safe_load(path.read_text()) or {}).get("_target_")
        if target and getattr(get_object(target), "supports_trees", False) is True:
            out.append(path.stem)
    return out


def check_pairing(drafter: DictConfig, verifier: DictConfig) -> None:
    """Refuse a tree drafter with a chain-only verifier, naming the verifiers that fit."""
    d_cls, v_cls = _target("drafter", drafter), _target("verifier", verifier)
    if (
        getattr(d_cls, "makes_trees", False) is True
        and getattr(v_cls, "supports_trees", True) is False
    ):
        raise BadInput(
            f"the drafter {d_cls.__name__} makes token trees but the verifier "
            f"{v_cls.__name__} verifies chains only; pick a tree verifier "
            f"(verifier={'|'.join(tree_verifiers())}) or a chain drafter "
            "(drafter=chain)"
        )


def check_components(cfg: DictConfig) -> None:
    """Check the component groups of an eval config (see the module docstring).

    Raises:
        BadInput: naming the first bad key, its value and the fix.
    """
    if cfg.get("device") is not None:
        check_cpu_index("device", cfg.device)
    for key in GROUPS:
        node = OmegaConf.select(cfg, key)
        if isinstance(node, DictConfig) and "_target_" in node:
            check_arguments(key, node)
    if isinstance(cfg.get("model"), DictConfig):
        check_model_keys(cfg.model)
    drafter, verifier = cfg.get("drafter"), cfg.get("verifier")
    if (
        isinstance(drafter, DictConfig)
        and isinstance(verifier, DictConfig)
        and "_target_" in drafter
        and "_target_" in verifier
    ):
        check_pairing(drafter, verifier)
