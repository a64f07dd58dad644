"""Fixtures of the tests of loading and running pairs (``specdec.models``):

the tiny and SmolLM2 pairs, ``model=hf``, attention, kernels, GPU path, big targets, draft
placement.
"""
