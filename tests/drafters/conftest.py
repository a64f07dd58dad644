"""Fixtures of the tests of drafters and their policies (``specdec.drafters``):

exactness through the engine, greedy = AR, background work.
"""
