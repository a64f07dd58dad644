"""The draft LM's network, re-exported: it lives in ``specdec.models.reduced_draft`` now.

The SmolLM2 loader (``specdec.models.smollm2``) loads the shipped draft, and a model loader may not
import a learner (README, "Layers"), so the network and its shipped format sit with the models;
distillation (``specdec.learners.draft_lm.module``) builds on them from here or from there.
"""

from __future__ import annotations

from specdec.models.reduced_draft import (
    EMBED_KEY,
    ReducedVocabDraft,
    attach_embeddings,
    copy_layer,
    draft_config,
    draft_from_checkpoint,
    init_from_target,
    load_draft,
    qkv_bias,
    save_draft,
    tokenizer_sha256,
)

__all__ = ["EMBED_KEY", "ReducedVocabDraft", "attach_embeddings", "copy_layer", "draft_config",
           "draft_from_checkpoint", "init_from_target", "load_draft", "qkv_bias", "save_draft",
           "tokenizer_sha256"]
