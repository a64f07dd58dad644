"""Training the SpecDec++ acceptance-prediction head: ``module`` (LightningModule + DataModule,
weighted BCE with token mixing). Network: ``specdec.nets.specdecpp``; labels from target traces:
``specdec.data.specdecpp``."""
