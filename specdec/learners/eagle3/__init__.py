"""The EAGLE-3 feature drafter: ``net`` (fusion + one decoder layer + reduced-vocabulary head),
``data`` (target traces for tests and tiny pairs), ``module`` (LightningModule with training-time
test, DataModule, export). The decoding side is ``specdec.drafters.eagle3``."""
