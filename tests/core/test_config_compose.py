"""One way to compose a config, one spelling of the config folder, one ``_target_`` convention.

* ``specdec.config.compose_config`` is the only place that calls Hydra's ``initialize*`` /
  ``compose`` outside ``@hydra.main`` (the package, the scripts and the tests all go through it);
* ``specdec.paths.CONF_DIR`` is the only spelling of the config folder (no ``"conf"`` path literal
  elsewhere);
* a ``specdec`` ``_target_`` in ``conf/`` names the object by the package that exports it (its
  ``__init__`` lists the name in ``__all__``), else by a module (a ``.py`` file) that defines or
  re-exports it, never by a package that does not export it. Several spellings import, so nothing
  else enforces one; they are part of the config hashes, so the convention is the one the pinned
  hashes were taken with.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from hydra.core.global_hydra import GlobalHydra

from specdec.config import compose_config
from specdec.paths import CONF_DIR, ROOT

SOURCES = [p for folder in ("specdec", "scripts", "tests") for p in (ROOT / folder).rglob("*.py")]
HYDRA_CALL = re.compile(
    r"\binitialize(?:_config_dir|_config_module)?\(|\bhydra_compose\(|"
    r"from hydra import [^\n]*\bcompose\b"
)
CONF_LITERAL = re.compile(r"""["']conf["']""")


def _own_text(path: Path) -> str:
    return path.read_text() if path != Path(__file__) else ""


def test_only_compose_config_calls_hydra_compose():
    found = [str(p.relative_to(ROOT)) for p in SOURCES if HYDRA_CALL.search(_own_text(p))]
    assert found == ["specdec/config.py"], found


def test_only_specdec_paths_spells_the_config_folder():
    found = [str(p.relative_to(ROOT)) for p in SOURCES if CONF_LITERAL.search(_own_text(p))]
    assert found == ["specdec/paths.py"], found


def test_compose_config_composes_as_the_command_line_and_leaves_hydra_clear():
    cfg = compose_config("eval", ["model=tiny", "benchmark=tiny", "method=sps"])
    assert cfg.method_name == "sps" and cfg.hydra.runtime.choices.model == "tiny"
    assert not GlobalHydra.instance().is_initialized()
    bare = compose_config("eval", ["model=tiny", "method=sps"], hydra_node=False)
    assert "hydra" not in bare and bare.method_name == "sps"
    assert CONF_DIR.parent == ROOT and (CONF_DIR / "eval.yaml").is_file()


def _targets() -> list[tuple[str, str]]:
    out = []
    for path in sorted(CONF_DIR.rglob("*.yaml")):
        for match in re.finditer(r"_target_:\s*([\w.]+)", path.read_text()):
            if match.group(1).startswith("specdec."):
                out.append((str(path.relative_to(ROOT)), match.group(1)))
    return out


def split_target(target: str) -> tuple[str, str, str]:
    """``(module, name, rest)`` of a ``_target_``: the longest importable module, the object it
    holds, and attributes below it (``Class.method`` targets: ``rest`` = ``.method``)."""
    parts = target.split(".")
    for n in range(len(parts) - 1, 0, -1):
        try:
            importlib.import_module(".".join(parts[:n]))
        except ModuleNotFoundError:
            continue
        return ".".join(parts[:n]), parts[n], "".join(f".{p}" for p in parts[n + 1 :])
    raise AssertionError(f"{target}: no module of it imports")


def exported_as(target: str) -> str | None:
    """``package.Name`` when a package on the object's module path lists it in ``__all__``."""
    module, name, rest = split_target(target)
    obj = getattr(importlib.import_module(module), name)
    parts = obj.__module__.split(".")
    for n in range(1, len(parts)):
        package = importlib.import_module(".".join(parts[:n]))
        if name in getattr(package, "__all__", ()):
            return f"{package.__name__}.{name}{rest}"
    return None


def spelling_error(target: str) -> str | None:
    """What is wrong with a ``_target_``'s spelling (None: it follows the convention)."""
    exported = exported_as(target)
    if exported is not None:
        return None if target == exported else f"write {exported}, as its package exports it"
    module = importlib.import_module(split_target(target)[0])
    if hasattr(module, "__path__"):  # a package that does not list the name in __all__
        return f"{module.__name__} does not export it: name the module that defines it"
    return None


def test_every_specdec_target_follows_one_spelling():
    targets = _targets()
    assert len(targets) > 30
    wrong = [f"{where}: {t}: {spelling_error(t)}" for where, t in targets if spelling_error(t)]
    assert wrong == [], wrong


def test_the_spelling_rule_on_each_kind(monkeypatch):
    import specdec.drafters
    from specdec.drafters.eagle3 import Eagle3Drafter

    assert spelling_error("specdec.drafters.TopKTreeDrafter") is None  # exported by its package
    assert "write specdec.drafters.TopKTreeDrafter" in spelling_error(
        "specdec.drafters.tree.TopKTreeDrafter"
    )
    assert spelling_error("specdec.drafters.eagle3.Eagle3Drafter") is None  # its module
    # reachable through the package, which does not list it in __all__
    monkeypatch.setattr(specdec.drafters, "Eagle3Drafter", Eagle3Drafter, raising=False)
    assert "does not export it" in spelling_error("specdec.drafters.Eagle3Drafter")


# --- the model configs' `placement:` node (specdec/models/placement_config.py) ---------------

MODELS = sorted(p.stem for p in (CONF_DIR / "model").glob("*.yaml"))
IN_PROCESS = {"tiny", "smollm2"}  # built here: no from_pretrained keys in their node
PIN = ["paths.cache_dir=/cache", "paths.data_dir=/data", "paths.root_dir=/root"]


def _model(name: str, *extra: str):
    target = ["model.target=org/x"] if name == "hf" else []
    return compose_config(
        "eval", [f"model={name}", "benchmark=tiny", "method=ar", *target, *extra]
    ).model


def test_every_model_config_composes_into_a_placement():
    import torch

    from specdec.models.placement import Placement
    from specdec.models.placement_config import KEYS

    assert len(MODELS) == 9
    for name in MODELS:
        model = _model(name)
        assert [k for k in KEYS if k in model] == [], f"{name}: a flat placement key"
        node = set(model.placement)
        want = set(KEYS) - (
            {"attn_implementation", "device_map", "max_memory"} if name in IN_PROCESS else set()
        )
        assert node == want, f"{name}: placement keys {sorted(node)}"
        placement = Placement.from_config(model)
        assert placement.device == placement.draft_device == torch.device("cpu")
        assert str(placement.dtype) == f"torch.{model.placement.dtype}"
        # the eval's device=cuda places everything (composing checks no device)
        assert Placement.from_config(_model(name, "device=cuda")).device.type == "cuda"


def test_the_old_flat_overrides_name_their_key_in_the_node():
    import pytest

    from specdec.cli_check import check_overrides
    from specdec.errors import BadInput
    from specdec.models.placement import Placement

    for flat in ("model.dtype=bfloat16", "model.draft_device=cuda:1", "model.linear_kernel=stock"):
        key, value = flat.split("=")
        new = key.replace("model.", "model.placement.")
        with pytest.raises(BadInput, match=rf"{key} is now {new}.*write {new}={value}"):
            check_overrides(["model=tiny", flat], "eval")
    with pytest.raises(BadInput, match=r"model.attn_implementation is now model.placement.attn"):
        check_overrides(
            ["model=hf", "model.target=org/x", "model.attn_implementation=sdpa"], "eval"
        )
    with pytest.raises(BadInput, match=r"model.dtype is now model.placement.dtype"):
        check_overrides(["+experiment=eagle3_tiny", "model.dtype=float64"], "train")
    check_overrides(["model=tiny", "device=cuda", "model.placement.dtype=float64"], "eval")
    added = compose_config("eval", ["model=tiny", "+model.dtype=float64"])  # composes, then:
    with pytest.raises(BadInput, match=r"model.dtype is now model.placement.dtype"):
        Placement.from_config(added.model)


#: records hashes (config_hash of the resolved eval config, paths pinned) and training folders'
#: hashes of the flat model configs, computed on main at da650cc before the placement node
OLD_HASHES = {
    ("eval", "tiny", ()): "1c8292d297a9",
    ("eval", "smollm2", ()): "6b85bd9accbd",
    # device=cuda now defaults to the static cache (GPU presets): the flat config of the time had
    # it off, as this explicit override does
    ("eval", "tiny", ("device=cuda", "model.static_cache=false")): "dd5906878e11",
    ("eval", "vicuna68m_vicuna13b", ()): "be3fd719e88c",
    ("eval", "tiny", ("dtype=float64", "linear_kernel=stock", "draft_threads=1")): "f4950424f4c0",
    (
        "eval",
        "hf",
        ("dtype=bfloat16", "attn_implementation=sdpa", "draft_device=cpu", "device_map=auto"),
    ): "87373b254ea3",
    ("train", "eagle3_tiny", ()): "8c3c5e210702",
    ("train", "hrad_smollm2", ()): "9c40282867a5",
}


def _hash(kind: str, name: str, keys: tuple[str, ...]) -> str:
    from omegaconf import OmegaConf, open_dict

    from specdec.bench.records import config_hash
    from specdec.learners.resume import train_hash

    node = [k if k.startswith(("device=", "model.")) else f"model.placement.{k}" for k in keys]
    if kind == "train":
        return train_hash(compose_config("train", [f"+experiment={name}", *node, *PIN]))
    target = ["model.target=org/x"] if name == "hf" else []
    method = "ar" if name == "hf" else "sps"
    cfg = compose_config(
        "eval", [f"model={name}", "benchmark=tiny", f"method={method}", *target, *node, *PIN]
    )
    with open_dict(cfg):
        cfg.paths.output_dir = "/out"
    resolved = {
        k: OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v
        for k, v in cfg.items()
        if k != "hydra"
    }  # as the runner hashes it
    return config_hash(resolved)


def test_the_placement_node_keeps_the_hashes_of_the_flat_configs():
    got = {key: _hash(*key) for key in OLD_HASHES}
    assert got == OLD_HASHES


def test_cuda_picks_the_static_cache_and_the_gpu_tree_cpu_keeps_its_hash():
    for device, static, tree in (
        ("cpu", False, (2, 4)),
        ("cuda", True, (8, 32)),
        ("cuda:1", True, (8, 32)),
    ):
        cfg = compose_config("eval", ["model=tiny", "method=eagle3", f"device={device}"])
        assert cfg.model.static_cache is static
        assert (cfg.drafter.topk, cfg.drafter.total_tokens) == tree
    # a cuda run is another configuration now (its records do not resume the dynamic ones)
    assert (
        _hash("eval", "tiny", ("device=cuda",))
        != OLD_HASHES[("eval", "tiny", ("device=cuda", "model.static_cache=false"))]
    )


def test_a_placement_override_keeps_the_run_folder_of_its_flat_spelling():
    from hydra._internal.config_loader_impl import get_overrides_dirname
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from specdec.bench.rundir import run_folder_name

    def dirname(overrides: list[str]) -> str:
        parsed = OverridesParser.create().parse_overrides(overrides)
        return get_overrides_dirname(parsed, [], item_sep=",", kv_sep="=")

    flat = [
        "model.dtype=bfloat16",
        "model.max_cache_len=8",
        "model.draft_device=cuda:1",
        "seed=1",
        "model.max_memory={0:70GiB,1:70GiB}",
        "model.device_map=auto",
    ]
    moved = ("model.dtype", "model.draft_device", "model.max_memory", "model.device_map")
    node = [
        o.replace("model.", "model.placement.") if o.split("=")[0] in moved else o for o in flat
    ]
    assert run_folder_name(dirname(node)) == run_folder_name(dirname(flat)) == dirname(flat)
    assert run_folder_name("seed=1,threads=2") == "seed=1,threads=2"
