"""Running an eval (``python -m specdec.eval``): the runner, its checks and its outputs.

Imports the shared ``specdec.bench`` modules; imports ``specdec.bench.report`` only in ``paired``
and ``leaderboard`` (see ``specdec.bench``).
"""
