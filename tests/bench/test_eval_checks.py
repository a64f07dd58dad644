"""Eval run checks that fail early and clearly: bad config values (named before models load)."""

from __future__ import annotations

import pytest
import torch

import specdec.bench.run.runner as ev
from specdec.bench.run import dataset_run
from specdec.bench.run.schema import EvalKeys, validate
from specdec.testing.eval_cfg import eval_cfg
from specdec.testing.run_files import run_records as _records


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("limit=abc", "limit='abc' is not valid: expected an integer >= 1 or null"),
        (
            "sampling.temperature=hot",
            "sampling.temperature='hot' is not valid: expected a number >= 0",
        ),
        ("max_new_tokens=-1", "max_new_tokens=-1 is not valid: expected an integer >= 1 or null"),
        ("warmup=-1", "warmup=-1 is not valid: expected an integer >= 0"),
        ("seed=x", "seed='x' is not valid: expected an integer"),
        ("seed=true", "seed=True is not valid: expected an integer"),
        ("sampling.top_p=0", "sampling.top_p=0 is not valid: expected a number > 0.0 and <= 1.0"),
        ("threads=0", "threads=0 is not valid"),
        ("quality=maybe", "quality='maybe' is not valid: expected true or false"),
        ("benchmark.datasets.tiny.limit=abc", "benchmark.datasets.tiny.limit='abc' is not valid"),
        ("device=gpu", "device='gpu' is not a torch device"),
    ],
)
def test_bad_values_name_the_key_before_any_model_loads(tmp_path, no_models, override, message):
    with pytest.raises(ValueError) as err:
        ev.run(eval_cfg(tmp_path, [override]))
    assert message in str(err.value)


def test_good_values_pass_typed(tmp_path):
    keys = validate(eval_cfg(tmp_path, ["sampling.temperature=1", "limit=3"]))
    assert isinstance(keys, EvalKeys) and keys.limit == 3 and keys.sampling.temperature == 1


def _nan_from_call(model, k: int) -> None:
    """Make ``model``'s k-th forward (1-based) and every later one return NaN logits."""
    calls = [0]

    def hook(module, args, out):
        calls[0] += 1
        if calls[0] >= k:
            out.logits.fill_(float("nan"))

    model.register_forward_hook(hook)


@pytest.mark.parametrize(
    ("role", "call", "where"),
    [
        ("target", 1, "at the prompt's prefill"),
        ("target", 4, "at decoding step 2"),  # prefill, then one target forward per AR step
        ("draft", 2, "at decoding step 0"),  # the draft's prefill, then its first draft forward
    ],
)
def test_nan_logits_stop_the_generation_naming_the_model_and_step(role, call, where):
    from specdec.drafters import EmptyDrafter, ModelDrafter
    from specdec.drafters.policies import Fixed
    from specdec.engine import generate
    from specdec.forwards import NonFiniteLogits
    from specdec.lm import CachedLM
    from specdec.models.tiny import tiny_pair
    from specdec.sampling import Sampling, TorchCoins
    from specdec.verifiers import Tokenwise

    pair, greedy = tiny_pair(), Sampling(temperature=0.0)
    _nan_from_call(pair.target if role == "target" else pair.draft, call)
    drafter = (
        EmptyDrafter()
        if role == "target"
        else ModelDrafter(CachedLM(pair.draft, role="draft"), Fixed(3))
    )
    with pytest.raises(NonFiniteLogits) as err:
        generate(
            pair.tokenizer.encode("Hello there"),
            CachedLM(pair.target),
            drafter,
            Tokenwise(),
            sampling=greedy,
            coins=TorchCoins(0),
            max_new_tokens=8,
        )
    assert f"the {role} model produced NaN or +inf logits" in str(err.value)
    assert str(err.value).endswith(where)


def test_a_nan_target_fails_the_eval_instead_of_recording_token_0(tmp_path, monkeypatch):
    import torch

    import specdec.models.tiny as tiny

    build = tiny.tiny_pair

    def nan_target(**kwargs):
        pair = build(**kwargs)
        with torch.no_grad():
            for p in pair.target.parameters():
                p.fill_(float("nan"))
        return pair

    monkeypatch.setattr(tiny, "tiny_pair", nan_target)
    with pytest.raises(FloatingPointError, match="the target model produced NaN or \\+inf logits"):
        ev.run(eval_cfg(tmp_path, ["method=ar", "cost_model=false", "warmup=0"]))
    assert not (tmp_path / "records" / "tiny.jsonl").exists()  # nothing recorded


def test_device_cuda_without_cuda_fails_before_any_model_loads(tmp_path, no_models, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # as on this CPU-only VM
    with pytest.raises(ValueError, match="device=cuda was requested but CUDA is not available"):
        ev.run(eval_cfg(tmp_path, ["device=cuda"]))


def test_the_tiny_pair_goes_to_the_requested_device_or_fails(tmp_path, no_models, monkeypatch):
    import torch

    from specdec.bench.run.fingerprint import machine_tag
    from specdec.models.tiny import tiny_pair

    cfg = eval_cfg(tmp_path, ["device=meta"])
    assert cfg.model.placement.device == "meta"  # the config passes it on
    assert tiny_pair(placement={"device": "meta"}).devices() == [torch.device("meta")]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="model.placement.draft_device=cuda was requested"):
        ev.run(eval_cfg(tmp_path, ["model.placement.draft_device=cuda"]))
    tag = machine_tag([torch.device("cpu"), torch.device("meta")])  # where the models are
    assert tag["device"] == "cpu,meta" and "gpu" not in tag


def test_a_loader_that_ignores_device_is_refused_before_generating(tmp_path, monkeypatch):
    import specdec.models.tiny as tiny

    build = tiny.tiny_pair
    monkeypatch.setattr(tiny, "tiny_pair", lambda placement, **kwargs: build(**kwargs))
    monkeypatch.setattr(dataset_run, "run_prompt", lambda *a, **k: pytest.fail("generated"))
    with pytest.raises(
        ValueError, match="device=meta was requested but the pair's loader put the target on cpu"
    ):
        ev.run(eval_cfg(tmp_path, ["device=meta"]))


@pytest.fixture
def short_context(monkeypatch):
    """The tiny pair with 100 target and ``draft`` positions (tiny-2's 200-odd tokens overflow)."""
    import specdec.models.tiny as tiny

    build, draft = tiny.tiny_pair, [100]

    def short(**kwargs):
        pair = build(**kwargs)
        pair.target.config.max_position_embeddings = 100
        pair.draft.config.max_position_embeddings = draft[0]
        return pair

    monkeypatch.setattr(tiny, "tiny_pair", short)
    return draft


def test_a_prompt_past_the_models_positions_fails_naming_it(tmp_path, short_context):
    overrides = ["method=sps", "limit=3", "cost_model=false", "max_new_tokens=6"]
    with pytest.raises(ValueError) as err:
        ev.run(eval_cfg(tmp_path, overrides))
    message = str(err.value)
    assert message.startswith("prompt 'tiny-2' of dataset tiny (turn 1) has ")
    assert "it needs " in message and "the target model has max_position_embeddings=100" in message
    assert "set truncate_prompts=left to keep its last 94 tokens" in message
    short_context[0] = 80  # the draft's positions count too
    with pytest.raises(ValueError, match="the draft model has max_position_embeddings=80"):
        ev.run(eval_cfg(tmp_path / "draft", overrides))


def test_truncate_prompts_left_keeps_the_last_tokens_and_says_so(
    tmp_path, short_context, monkeypatch
):
    import specdec.bench.run.method as method

    lengths, real = [], method.generate
    monkeypatch.setattr(
        method, "generate", lambda ids, *a, **k: lengths.append(len(ids)) or real(ids, *a, **k)
    )
    ev.run(
        eval_cfg(
            tmp_path,
            [
                "method=sps",
                "limit=3",
                "cost_model=false",
                "max_new_tokens=6",
                "truncate_prompts=left",
                "warmup=0",
            ],
        )
    )
    recs = _records(tmp_path)
    assert [r["prompt_id"] for r in recs] == ["tiny-0", "tiny-1", "tiny-2"]
    assert recs[0]["truncated_tokens"] == recs[1]["truncated_tokens"] == 0
    assert recs[2]["truncated_tokens"] > 0 and lengths[2] == 94  # 100 positions - 6 new tokens


def test_max_new_tokens_alone_past_the_positions_is_refused():
    from specdec.bench.run.checks import fit_context

    with pytest.raises(ValueError, match="max_new_tokens=100 leaves no room for a prompt"):
        fit_context(
            [1, 2], max_new_tokens=100, limits={"target": 100}, truncate="left", where="prompt 'x'"
        )
    assert fit_context(
        [1, 2, 3], max_new_tokens=1, limits={"target": 3, "draft": 9}, truncate="left", where=""
    ) == ([2, 3], 1)


def test_minus_inf_logits_are_legal_but_a_row_without_a_finite_logit_is_not():
    from specdec.forwards import NonFiniteLogits, check_finite

    inf = float("inf")
    check_finite(torch.tensor([[0.0, -inf, 1.0]]), role="draft", context=0)  # a reduced vocab
    for bad in ([[0.0, inf, 1.0]], [[-inf, -inf, -inf]], [[0.0, float("nan"), -inf]]):
        with pytest.raises(NonFiniteLogits, match="the draft model .* positions 7..7"):
            check_finite(torch.tensor(bad), role="draft", context=7)
