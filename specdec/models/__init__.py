"""Model pairs (target + draft + tokenizer): tiny random pairs, hub/local pairs, SmolLM2."""

from specdec.models.pair import ModelPair, check_vocab, load_pair

__all__ = ["ModelPair", "check_vocab", "load_pair"]
