"""EAGLE-3's draft network: ``net`` (ours: fusion, one decoder layer, reduced-vocabulary head;
save / load), ``feature_asset`` (a shipped feature drafter read and checked against its target,
SpecBlock's too), ``published`` (the released heads' architecture), ``interop`` (reading and
writing the published layouts). Trained by ``specdec.learners.eagle3``, decoded by
``specdec.drafters.eagle3``."""
