"""The one cap on draft-tree sizes, checked by the tree drafters' constructors before any drafting.

A tree of N nodes costs an ``[N, past + N]`` attention mask in every forward that scores it (and
a multi-draft ``q`` of ``[N, V]``), so a size knob a few digits too long (``drafter.topk=100000``)
would allocate tens of gigabytes and push other processes on the machine out of memory. Every knob
that multiplies the nodes of one step is therefore bounded twice, from the config, when the drafter
is built:

* a width (children of one node) by the vocabulary: more children than tokens cannot exist;
* the most nodes one step can create (the verified tree, or the draft nodes forwarded while growing
  it, whichever is larger) by ``max_tree_nodes()``: 1024 by default, far above the published trees
  (EAGLE-2: 60 nodes, SpecInfer: 64-128), raised with the environment variable
  ``SPECDEC_MAX_TREE_NODES=<n>`` on a machine with the memory for it.

Depths come from the draft-length policy's ``longest()`` (the largest ``limit()`` it can return).
"""

from __future__ import annotations

import os

from specdec.errors import BadInput

MAX_TREE_NODES = 1024
ENV = "SPECDEC_MAX_TREE_NODES"


def max_tree_nodes() -> int:
    """The cap on the nodes of one draft step: ``$SPECDEC_MAX_TREE_NODES`` or 1024."""
    raw = os.environ.get(ENV)
    if raw is None or raw == "":
        return MAX_TREE_NODES
    try:
        cap = int(raw)
    except ValueError:
        cap = 0
    if cap < 1:
        raise BadInput(
            f"{ENV}={raw!r} is not valid: expected an integer >= 1 (unset: {MAX_TREE_NODES})"
        )
    return cap


def check_width(key: str, width: int, vocab: int) -> None:
    """Refuse a per-node width above the vocabulary (``key`` names the config key)."""
    if width > vocab:
        raise BadInput(
            f"{key}={width} exceeds the draft vocabulary ({vocab} tokens): a node "
            f"cannot have more distinct children; lower {key} to <= {vocab}"
        )


def check_nodes(nodes: int, *, what: str, fix: str) -> None:
    """Refuse a step that can create more than ``max_tree_nodes()`` nodes.

    Args:
        nodes: the most nodes one draft step can create (root included).
        what: how ``nodes`` follows from the config, e.g. ``"drafter.num_drafts=500 x gamma 4"``.
        fix: the keys to lower.
    """
    cap = max_tree_nodes()
    if nodes > cap:
        raise BadInput(
            f"{what} makes up to {nodes} draft nodes per step, over the cap of {cap} "
            f"(each scored with an [N, N] attention mask); lower {fix}, or raise the "
            f"cap with {ENV}=<n> if the machine has the memory"
        )


def tree_nodes(branching: list[int], depth: int, vocab: int) -> int:
    """Nodes of a static top-k tree ``depth`` levels deep (root included): level ``d`` multiplies
    the previous one by ``branching[d]`` (1 past the list), each width capped by the vocabulary."""
    total, level = 1, 1
    for d in range(depth):
        level *= min(branching[d] if d < len(branching) else 1, vocab)
        total += level
        if total > 1 << 40:  # already far past any cap
            break
    return total
