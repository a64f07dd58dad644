"""Reporting finished eval runs (``python -m specdec.report``): rows, speedups, tables, exports.

Reads run folders through the shared ``specdec.bench`` modules (``run_summary``, ``records``);
never imports ``specdec.bench.run`` (see ``specdec.bench``).
"""
