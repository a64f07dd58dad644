"""Fixtures of the tests of the decoding loop and what it stands on:

engine, core types, CachedLM, static cache, sampling and coins, row ops, trees, vocab rows,
threads, placement, composition, the Python API, import layers and this suite's layout.
"""
