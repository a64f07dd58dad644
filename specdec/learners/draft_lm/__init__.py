"""The small draft LM's distillation: ``reference`` (reference-answer labelling),
``trace_dataset`` (batching), ``module`` (distillation LightningModule). The network and its
shipped format are a model of the pair: ``specdec.models.reduced_draft``."""
