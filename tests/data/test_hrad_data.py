"""H-RAD data: labels are the engine's verdicts, features are z_t at the last verified position."""

from __future__ import annotations

import pytest
import torch

from specdec.data.hrad import generate_hrad_data, hrad_class, synthetic_prompts
from specdec.data.hrad_store import committed_sequences, load_hrad_data
from specdec.nets.hrad.features import hrad_features, hrad_layers

GAMMA, K, PROMPTS = 3, 3, 6


def make_data(pair, out, temperature: float, **kw):
    kw = {
        "synthetic": {"count": PROMPTS, "seed": 0},
        "gamma_max": GAMMA,
        "layers": K,
        "sampling": {"temperature": temperature},
        "max_new_tokens": 14,
        "chunk_size": 4,
        "val_fraction": 0.25,
        "test_fraction": 0.25,
        **kw,
    }
    return generate_hrad_data(pair, str(out), **kw)


@pytest.fixture(scope="module")
def greedy_dir(tiny64, tmp_path_factory):
    return make_data(tiny64, tmp_path_factory.mktemp("hrad") / "t0", 0.0)


@pytest.fixture(scope="module")
def sampled_dir(tiny64, tmp_path_factory):
    return make_data(tiny64, tmp_path_factory.mktemp("hrad") / "t1", 1.0)


def test_classes_of_accepted_lengths():
    assert [hrad_class(n, 7) for n in range(8)] == [0, 1, 1, 1, 1, 1, 1, 2]
    with pytest.raises(ValueError, match="accepted length 8 outside 0..gamma_max=7"):
        hrad_class(8, 7)


def engine_steps(pair, text: str, temperature: float) -> tuple[list[int], list[tuple[int, int]]]:
    """A plain sps run (no recorder) with the data's coins: new tokens, (drafted, accepted)."""
    from specdec.data.prompts import encode_turn
    from specdec.drafters import ModelDrafter
    from specdec.drafters.policies import Fixed
    from specdec.engine import generate
    from specdec.lm import CachedLM
    from specdec.sampling import Sampling, TorchCoins, prompt_seed
    from specdec.verifiers import Tokenwise

    smp = Sampling(temperature=temperature)
    ids = encode_turn(pair.tokenizer, [{"role": "user", "content": text}], chat_template=True)
    drafter = ModelDrafter(CachedLM(pair.draft, role="draft"), Fixed(GAMMA))
    gen = generate(
        ids,
        CachedLM(pair.target),
        drafter,
        Tokenwise(),
        sampling=smp,
        coins=TorchCoins(prompt_seed(0, text)),
        max_new_tokens=14,
        stop_ids=[pair.tokenizer.eos_token_id],
    )
    return ids + gen.tokens, list(zip(gen.stats.drafted_per_step, gen.stats.accepted_per_step))


@pytest.mark.parametrize("which", ["greedy", "sampled"])
def test_labels_equal_the_engines_accepted_lengths(tiny64, greedy_dir, sampled_dir, which):
    folder, temperature = (greedy_dir, 0.0) if which == "greedy" else (sampled_dir, 1.0)
    rows, meta = load_hrad_data(folder)
    seqs = committed_sequences(folder)
    assert meta["gamma_max"] == GAMMA and sorted(seqs) == list(range(PROMPTS))
    for i, text in enumerate(synthetic_prompts(PROMPTS, seed=0)):
        committed, steps = engine_steps(tiny64, text, temperature)
        assert seqs[i] == committed  # the recorder leaves decoding untouched
        mine = rows["prompt"] == i
        want = [(s, a) for s, (d, a) in enumerate(steps) if d == GAMMA]
        assert list(zip(rows["step"][mine].tolist(), rows["accepted"][mine].tolist())) == want
        assert rows["labels"][mine].tolist() == [hrad_class(a, GAMMA) for _, a in want]
    if which == "sampled":  # T = 1 on the random pair: more than one class occurs
        assert len(set(rows["labels"].tolist())) >= 2


def test_greedy_labels_match_an_independent_argmax_check(tiny64, greedy_dir):
    """Greedy accepted length = leading draft tokens equal to the target's argmax, recomputed with
    one uncached forward of prefix + draft (no engine, no verifier)."""
    rows, _ = load_hrad_data(greedy_dir)
    seqs = committed_sequences(greedy_dir)
    for r in range(len(rows["labels"])):
        prefix = seqs[int(rows["prompt"][r])][: int(rows["prefix_len"][r])]
        draft = rows["draft"][r].tolist()
        logits = tiny64.target(input_ids=torch.tensor([prefix + draft])).logits[0]  # [T, V]
        argmax = logits[len(prefix) - 1 : len(prefix) - 1 + GAMMA].argmax(-1).tolist()
        n = next((j for j, (a, b) in enumerate(zip(argmax, draft)) if a != b), GAMMA)
        assert int(rows["accepted"][r]) == n, r


def test_features_are_last_verified_hidden_states_and_root_embedding(tiny64, sampled_dir):
    """z_t from the data = hidden_states[-K:] at the position before the root, then e(root)."""
    rows, _ = load_hrad_data(sampled_dir)
    seqs = committed_sequences(sampled_dir)
    hidden = tiny64.target.config.hidden_size
    assert rows["features"].shape == (len(rows["labels"]), (K + 1) * hidden)
    after_accept = 0  # rows whose last step kept accepted nodes (f is then not the root's)
    for r in range(len(rows["labels"])):
        prefix = seqs[int(rows["prompt"][r])][: int(rows["prefix_len"][r])]
        same = (rows["prompt"] == rows["prompt"][r]) & (rows["step"] == rows["step"][r] - 1)
        after_accept += bool(same.any() and rows["accepted"][same].item() > 0)
        out = tiny64.target(input_ids=torch.tensor([prefix]), output_hidden_states=True)
        f = torch.stack([h[0, -2] for h in out.hidden_states[-K:]])  # [K, H] before the root
        e = tiny64.target.get_input_embeddings()(torch.tensor(prefix[-1:]))[0]  # [H]
        torch.testing.assert_close(rows["features"][r], hrad_features(f, e), atol=2e-5, rtol=1e-5)
    assert after_accept >= 3, after_accept


def test_feature_construction_layout_and_errors():
    hidden = torch.arange(2 * 3 * 4, dtype=torch.float64).reshape(2, 3, 4)  # [B, k, H]
    emb = -torch.ones(2, 4)  # [B, H]
    z = hrad_features(hidden, emb)  # [B, (k+1)H]
    assert z.shape == (2, 16) and z.dtype == torch.float32
    assert torch.equal(z[:, :12], hidden.flatten(1).float()) and torch.equal(z[:, 12:], emb)
    with pytest.raises(ValueError, match=r"does not match root embedding"):
        hrad_features(hidden, torch.ones(2, 5))
    assert hrad_layers(30) == (-4, -3, -2, -1) and hrad_layers(2, 3) == (-3, -2, -1)
    with pytest.raises(ValueError, match=r"hrad.layers=4 but a 2-layer target has 3 hidden"):
        hrad_layers(2, 4)


def test_rows_of_one_prompt_share_a_split(sampled_dir):
    rows, _ = load_hrad_data(sampled_dir)
    for i in rows["prompt"].unique().tolist():
        assert len(rows["split"][rows["prompt"] == i].unique()) == 1


def test_resume_keeps_finished_chunks_and_refuses_other_settings(tiny64, tmp_path):
    out = make_data(tiny64, tmp_path / "d", 1.0)
    chunks = sorted(out.glob("chunk_*.safetensors"))
    assert len(chunks) == 2  # 6 prompts, 4 per chunk
    before = chunks[1].read_bytes()
    stamp = chunks[0].stat().st_mtime_ns
    chunks[1].unlink()
    make_data(tiny64, out, 1.0)
    assert chunks[0].stat().st_mtime_ns == stamp  # kept, not redone
    assert chunks[1].read_bytes() == before  # redone identically (per-prompt coins)
    with pytest.raises(ValueError, match=r"other settings \(\['gamma_max'\]\).*delete"):
        make_data(tiny64, out, 1.0, gamma_max=GAMMA + 1)


def test_missing_data_and_missing_draft_name_the_fix(tiny64, tmp_path):
    from dataclasses import replace

    with pytest.raises(FileNotFoundError, match=r"\+experiment=hrad_<model> stage=data"):
        load_hrad_data(tmp_path)
    with pytest.raises(ValueError, match="need a draft model"):
        generate_hrad_data(replace(tiny64, draft=None), str(tmp_path), synthetic={"count": 1})
