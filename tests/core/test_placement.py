"""One typed placement: every preset's modules follow it, checked on the ``meta`` device.

PyTorch's ``meta`` device stands in for a GPU: a tensor a drafter, policy or head left on the CPU
shows as ``cpu`` next to the target's ``meta`` weights, with no GPU and no arithmetic (build only,
no decoding). Before the placement, ``eagle3`` kept its net and ``specdecpp`` its acceptance head on
the CPU while the target sat elsewhere (the H200 crashes of the issue).
"""

from __future__ import annotations

import pytest
import torch
from hydra.utils import instantiate
from torch import nn

from specdec.bench.run.method import build_method
from specdec.bench.run.preflight import check_devices
from specdec.errors import BadInput
from specdec.models.placement import Held, Placement, check_built
from specdec.paths import CONF_DIR
from specdec.testing.paths import REPO

PRESETS = sorted(p.stem for p in (CONF_DIR / "method").glob("*.yaml"))
META = ["model.placement.device=meta", "model.placement.draft_device=meta"]


#: drafter classes that hold no model or net (the draft comes from the context, or is empty)
DRAFT_FREE = {"EmptyDrafter", "PromptLookupDrafter"}


def _misplaced(modules: dict[str, Held], device: str) -> list[str]:
    return [
        f"{name}.{t}"
        for name, (_, m) in modules.items()
        for t, x in [*m.named_parameters(), *m.named_buffers()]
        if x.device.type != device
    ]


@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_holds_its_tensors_where_the_placement_says(compose, preset):
    cfg = compose("eval", [f"method={preset}", *META])
    check_devices(cfg)  # meta target, meta draft: nothing to refuse
    pair = instantiate(cfg.model)
    assert pair.placement.device.type == pair.placement.draft_device.type == "meta"
    method = build_method(cfg, pair)  # check_built runs at its end
    modules = method.modules()
    # every preset but the draft-free ones (no draft model, no net: ar, prompt lookup) holds more
    draft_free = cfg.drafter._target_.rsplit(".", 1)[-1] in DRAFT_FREE
    assert "target" in modules and len(modules) >= (1 if draft_free else 2)
    assert _misplaced(modules, "meta") == []


def test_the_feature_nets_and_heads_are_among_the_modules_checked(compose):
    held = {}
    for preset in ("eagle3", "specblock", "specdecpp", "specbranch"):
        cfg = compose("eval", [f"method={preset}", *META])
        held[preset] = build_method(cfg, instantiate(cfg.model)).modules()
    assert held["eagle3"]["drafter.net"].role == held["specblock"]["drafter.net"].role == "features"
    assert held["specdecpp"]["drafter.policy.head"].role == "draft"
    assert held["specbranch"]["drafter.hrad"].role == "features"


def test_the_check_names_a_planted_cpu_tensor_and_the_fix():
    meta = torch.device("meta")
    net = nn.Linear(2, 2, device=meta)
    net.register_buffer("stray", torch.zeros(1))  # left on the CPU
    placement = Placement(device=meta, draft_device=meta, dtype=torch.float32)
    check_built({"drafter.net": Held("draft", nn.Linear(2, 2, device=meta))}, placement)
    with pytest.raises(
        BadInput,
        match=r"drafter\.net\.stray on cpu, the placement says meta.*"
        r"Placement\.place",
    ):
        check_built({"drafter.net": Held("features", net)}, placement)
    # a draft on its own device is fine, a feature net there is not
    split = Placement(device=meta, draft_device=torch.device("cpu"), dtype=torch.float32)
    check_built({"drafter.lm": Held("draft", nn.Linear(2, 2))}, split)
    with pytest.raises(BadInput, match="drafter.net.weight on cpu, the placement says meta"):
        check_built({"drafter.net": Held("features", nn.Linear(2, 2))}, split)


def test_place_moves_casts_and_sets_the_pairs_cpu_kernel():
    from specdec.models.kernels import PackedLinear

    placement = Placement(
        device=torch.device("cpu"),
        draft_device=torch.device("meta"),
        dtype=torch.float64,
        linear_kernel="packed",
    )
    net = placement.place(nn.Sequential(nn.Linear(2, 2)), "features")
    assert type(net[0]) is PackedLinear and net[0].weight.dtype == torch.float64
    head = placement.place(nn.Sequential(nn.Linear(2, 2)), "draft", cast=False)
    assert type(head[0]) is nn.Linear and head[0].weight.device.type == "meta"
    assert head[0].weight.dtype == torch.float32  # cast=False keeps a head's own dtype


def test_the_fingerprint_records_the_placement(compose):
    cfg = compose("eval", ["method=sps", *META])
    pair = instantiate(cfg.model)
    info = pair.describe()
    assert {k: info[k] for k in ("device", "draft_device", "dtype", "linear_kernel")} == {
        "device": "meta",
        "draft_device": "meta",
        "dtype": "float32",
        "linear_kernel": "stock",
    }
    assert info["threads"] == str(torch.get_num_threads()) and info["attention"] == "sdpa"
    assert pair.placement.describe().items() <= info.items()
    from specdec.models.tiny import tiny_pair

    cpu = tiny_pair(placement={"draft_threads": 1}).describe()
    assert (cpu["device"], cpu["linear_kernel"], cpu["draft_threads"]) == ("cpu", "packed", "1")


@pytest.mark.parametrize("preset", ["eagle3", "specblock", "specblock_bandit"])
def test_a_draft_device_for_a_feature_drafter_is_refused_before_loading(
    compose, preset, monkeypatch
):
    import specdec.models.tiny as tiny

    def no_loading(**_):
        raise AssertionError("the pair was loaded before the placement was checked")

    monkeypatch.setattr(tiny, "tiny_pair", no_loading)
    cfg = compose(
        "eval",
        [f"method={preset}", "model.placement.device=meta", "model.placement.draft_device=cpu"],
    )
    with pytest.raises(
        BadInput,
        match=r"model\.placement\.draft_device=cpu.*drafts from the "
        r"target's features.*leave model\.placement\.draft_device "
        r"null or set it to "
        r"meta",
    ):
        check_devices(cfg)
    check_devices(compose("eval", ["method=sps", "model.placement.draft_device=meta"]))  # allowed


def test_a_device_that_does_not_exist_is_refused_before_loading(compose):
    for key, value in (("device", "gpu0"), ("model.placement.draft_device", "cuda:7")):
        cfg = compose("eval", ["method=sps", f"{key}={value}"])
        with pytest.raises(BadInput, match=rf"{key}=.*{value}"):
            check_devices(cfg)


def test_the_eval_refuses_the_feature_drafters_draft_device_without_loading(compose, monkeypatch):
    from specdec.bench.run import runner

    monkeypatch.setattr("specdec.models.tiny.tiny_pair", lambda **_: pytest.fail("loaded"))
    cfg = compose("eval", ["method=eagle3", "model.placement.draft_device=meta"])
    with pytest.raises(BadInput, match="model.placement.draft_device=meta"):
        runner.run(cfg)


@pytest.mark.parametrize("draft", ["trained", "truncated"])
def test_a_draft_sharing_the_targets_weights_is_not_moved_and_nothing_loads(draft, monkeypatch):
    import specdec.models.smollm2 as smollm2

    monkeypatch.setattr(smollm2, "load_target", lambda *_: pytest.fail("the target was loaded"))
    with pytest.raises(
        BadInput,
        match=rf"model\.placement\.draft_device=meta: the {draft} "
        r"SmolLM2 draft shares the target's weights.*leave "
        r"model\.placement\.draft_device",
    ):
        smollm2.smollm2_pair(draft=draft, placement={"draft_device": "meta"})


def test_a_feature_drafter_refuses_a_target_elsewhere_than_its_placement(tiny64):
    from specdec.core import TargetView
    from specdec.drafters.eagle3 import Eagle3Drafter
    from specdec.drafters.policies import Fixed
    from specdec.lm import CachedLM

    asset = str(REPO / "specdec" / "assets" / "eagle3" / "tiny")
    drafter = Eagle3Drafter(Fixed(2), asset, placement=Placement.cpu())
    with pytest.raises(
        BadInput,
        match=r"placed on cpu in torch.float32, but the target runs on "
        r"cpu in torch.float64.*placement=pair.placement",
    ):
        drafter.attach(TargetView(CachedLM(tiny64.target)))  # before: moved itself, silently
    placed = Eagle3Drafter(Fixed(2), asset, placement=Placement.cpu(torch.float64))
    placed.attach(TargetView(CachedLM(tiny64.target)))
    assert next(placed.net.parameters()).dtype == placed.lm.model.dtype == torch.float64


#: every call of a device check in the package: before loading by the entry points, after
#: building by compose, ``check_device`` only as their step (specdec/models/placement.py)
CHECK_CALLERS = {
    "check_before_loading": {"bench/run/preflight.py", "train.py"},
    "check_built": {"compose.py"},
    "check_device": {"models/devices.py", "models/placement.py"},
}


def test_nothing_else_checks_the_devices():
    import ast

    found: dict[str, set[str]] = {name: set() for name in CHECK_CALLERS}
    for path in (REPO / "specdec").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            func = getattr(node, "func", None) if isinstance(node, ast.Call) else None
            name = getattr(func, "id", None) or getattr(func, "attr", None)
            if name in found:
                found[name].add(str(path.relative_to(REPO / "specdec")))
    assert found == CHECK_CALLERS


def test_a_load_checks_the_devices_once_before_loading_and_once_after_building(monkeypatch):
    import specdec
    import specdec.bench.run.preflight as preflight
    import specdec.compose as compose

    calls: list[str] = []
    for module, name in ((preflight, "check_before_loading"), (compose, "check_built")):
        real = getattr(module, name)
        monkeypatch.setattr(
            module, name, lambda *a, _f=real, _n=name, **k: (calls.append(_n), _f(*a, **k))[1]
        )
    decoder = specdec.load("tiny", method="sps")
    assert calls == ["check_before_loading", "check_built"]
    assert decoder.pair.placement.device == torch.device("cpu")
