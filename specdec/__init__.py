"""specdec: a research framework for speculative decoding."""

__version__ = "0.1.0"
