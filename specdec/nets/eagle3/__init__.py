"""EAGLE-3's draft network: ``net`` (ours: fusion, one decoder layer, reduced-vocabulary head;
save / load), ``published`` (the released heads' architecture), ``interop`` (reading and writing
the published layouts). Trained by ``specdec.learners.eagle3``, decoded by
``specdec.drafters.eagle3``."""
