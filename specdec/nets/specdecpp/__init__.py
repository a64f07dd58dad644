"""SpecDec++'s acceptance-prediction head and its save / load (``head``). Trained by
``specdec.learners.specdecpp``, read by the ``specdecpp`` policy in ``specdec.drafters``."""
