"""The benchmark harness: everything ``python -m specdec.eval`` and ``python -m specdec.report``
need beyond the decoding library, in two subsystems and what they share.

* ``specdec.bench.run``: running an eval (``runner``: per-dataset generation, records and the
  summary; pre-flight and config checks, ranks, quality checks and their sandbox, loggers, the
  calibration, the sweep callback).
* ``specdec.bench.report``: reading finished runs (``runs``), leaderboard rows and their speedups
  (``rows``), greedy equality, repeats, categories, Markdown / CSV / plots, Spec-Bench export.
* Shared, at this level: the summary's typed form (``run_summary``), the records file
  (``records``), atomic JSON and the run lock (``rundir``), the eval keys (``eval_keys``), the
  cost model (``pricing``, ``costfit``) and W&B artifact plumbing (``wandb_artifacts``). Also
  here: the task quality checks (``quality``) and the sandbox they run code in (``sandbox``),
  used by the run side only, because ``conf/dataset/<name>.yaml`` names a check by its import
  path and that path is part of every records' config hash (``tests/bench/test_eval_keys.py``).

The rule (``tests/core/test_layers.py``): shared modules import neither subsystem; ``report`` never
imports ``run``; ``run`` imports ``report`` only where it needs the leaderboard's own numbers
(``run.paired``: the sweep objective, ``run.leaderboard``: the sweep's report). The decoding
library (``specdec.core``, ``engine``, ``lm``, ``drafters``, ``verifiers``, ...) never imports
from here.
"""
