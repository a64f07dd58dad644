"""SpecDec++'s draft-length policy: stop once a trained acceptance head predicts a rejection.

Huang, Guo & Wang 2025, "SpecDec++: Boosting Speculative Decoding via Adaptive Candidate Lengths"
(COLM'25); the head is trained by ``specdec.learners.specdecpp`` (``+experiment=specdecpp``). A
policy like those of ``specdec.drafters.policies`` (same interface;
``tests/drafters/test_policies_exact.py`` proves it lossless by exact enumeration).
"""

from __future__ import annotations

import logging

import torch

from specdec.drafters.policies import DraftState, Policy, check_bounds
from specdec.errors import BadInput
from specdec.models.placement import Held, Placement
from specdec.sampling_params import Sampling

log = logging.getLogger(__name__)


class SpecDecPP(Policy):
    """SpecDec++: stop once a trained head predicts that some drafted token is likely rejected.

    Huang, Guo & Wang 2025, "SpecDec++: Boosting Speculative Decoding via Adaptive Candidate
    Lengths" (COLM'25). A head on the draft's last hidden state predicts ``p̂_i``, the probability
    that drafted token ``y_i`` is accepted given that ``y_1..y_{i−1}`` were. The draft stops after
    token ``s`` when ``1 − Π_{i<s} p̂_i > threshold`` (``min_len ≤ s ≤ max_len``); stop ids end the
    draft in the drafter.

    Which hidden state scores which token: the head was trained on the hidden state *at the
    position of* ``y_i`` (after the draft consumed it), so ``p̂_i`` exists only once ``y_i`` has been
    forwarded. In the paper's MDP the decision "stop after s" is taken in state ``(y_1..y_{s−1})``,
    before ``y_s`` is drawn, so the newest token is not scored (public code,
    github.com/Kaffaljidhmah2/SpecDec_pp). Here,
    ``should_draft`` at depth ``d`` receives the hidden state of ``y_d`` (of the root at ``d = 0``,
    which is committed and never scored), multiplies ``p̂_d`` into the running product, and if
    ``1 − Π_{i≤d} p̂_i > threshold`` it lowers ``limit()`` to ``d + 1``: ``y_{d+1}`` is still drafted
    but is the last token, and the drafter skips its (unneeded) draft forward.

    Args:
        head: folder written by ``specdec.nets.specdecpp.head.save_head`` (the training
            export).
        threshold: stop threshold h on the predicted probability of a rejection.
        min_len, max_len: draft-length bounds (paper: 2 and 20).
        experiment: the training experiment, named in errors about a missing or mismatched head.
        placement: where the head goes (the draft's device; ``specdec.models.placement``).

    A warning is logged, once per sampling, when a step's sampling (``DraftState.sampling``)
    differs from the one the head's labels were computed with (its probabilities then describe
    another acceptance law).
    """

    wants_hidden = True

    def __init__(
        self,
        head: str,
        threshold: float = 0.3,
        *,
        min_len: int = 2,
        max_len: int = 20,
        experiment: str = "specdecpp_<model>",
        placement: Placement | None = None,
    ) -> None:
        from specdec.nets.specdecpp.head import load_head

        check_bounds("min_len", min_len, max_len)
        if not 0.0 <= threshold <= 1.0:
            raise BadInput(f"drafter.policy.threshold must be in [0, 1], got {threshold}")
        self.head = (placement or Placement.cpu()).place(
            load_head(head, experiment=experiment), "draft", cast=False
        )
        self.experiment = experiment
        self.path, self.checked = head, set()  # the samplings already compared with the labels
        self.threshold, self.min_len, self.max_len = float(threshold), int(min_len), int(max_len)
        self.reset()

    def reset(self) -> None:
        self.cap, self.survive = self.max_len, 1.0

    def longest(self) -> int:
        return self.max_len

    def limit(self) -> int:
        return self.cap

    @torch.inference_mode()
    def accept_prob(self, hidden: torch.Tensor) -> float:
        """``p̂`` of the token whose position produced ``hidden [H]``."""
        if hidden.shape[-1] != self.head.hidden_size:
            raise ValueError(
                f"acceptance head expects hidden size {self.head.hidden_size} but the draft has "
                f"{hidden.shape[-1]}: it was trained for another draft; retrain it with "
                f"`python -m specdec.train +experiment={self.experiment}`"
            )
        return float(self.head.accept_prob(hidden))

    def check_sampling(self, sampling: Sampling) -> None:
        """Warn once per ``sampling`` that differs from the labels' (the head's ``sampling``)."""
        trained = self.head.meta.get("sampling")
        if sampling in self.checked or trained is None:
            return
        self.checked.add(sampling)
        run = {
            "temperature": sampling.temperature,
            "top_k": sampling.top_k,
            "top_p": sampling.top_p,
        }
        if {k: trained.get(k) for k in run} != run:
            log.warning(
                "acceptance head %s was trained with sampling %s but runs with %s; "
                "retrain it with the run's sampling",
                self.path,
                trained,
                run,
            )

    def should_draft(self, state: DraftState) -> bool:
        assert state.hidden is not None, "SpecDecPP needs the draft hidden state (wants_hidden)"
        if state.sampling is not None:
            self.check_sampling(state.sampling)
        if state.depth == 0:
            self.cap, self.survive = self.max_len, 1.0
        else:
            self.survive *= self.accept_prob(state.hidden)  # p̂_d: the state of y_d scores y_d
        # decide now whether y_{d+1} (about to be drafted) is the last token of this draft
        if state.depth + 1 >= self.min_len and 1.0 - self.survive > self.threshold:
            self.cap = state.depth + 1
        return True

    def observe(self, drafted: int, accepted: int) -> None:
        self.cap = self.max_len

    def modules(self) -> dict[str, Held]:
        return {"drafter.policy.head": Held("draft", self.head)}
