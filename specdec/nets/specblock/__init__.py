"""SpecBlock's draft network: ``slots`` (masks, slot attention, rank features), ``net`` (the block
network), ``store`` (shipped format). Trained by ``specdec.learners.specblock``, decoded by
``specdec.drafters.specblock``."""
