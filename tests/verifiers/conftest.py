"""Fixtures of the tests of verifiers (``specdec.verifiers``):

hand-made cases, exact enumeration of losslessness, the HSD deviation, Theorem 2, the Monte-Carlo
check.
"""
