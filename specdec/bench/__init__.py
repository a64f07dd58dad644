"""The benchmark harness: everything ``python -m specdec.eval`` needs beyond the decoding library.

``runner`` (per-dataset generation, records, summaries), ``records`` (resumable JSONL per prompt),
``fingerprint`` (config hash inputs: weight digests, machine, software), ``quality`` (task checks),
``loggers`` (CSV / W&B), ``calibration`` + ``pricing`` (the cost model: modeled time),
``report`` + ``plots`` (leaderboard), ``leaderboard`` (the Hydra sweep callback), ``table``
(the per-run printed table). The decoding library (``specdec.core``, ``engine``, ``lm``,
``drafters``, ``verifiers``, ...) never imports from here.
"""
