"""Training the EAGLE-3 feature drafter: ``batches`` (trace batches), ``module`` (LightningModule
with training-time test, DataModule, export). The network is ``specdec.nets.eagle3``; the decoding
side is ``specdec.drafters.eagle3``."""
