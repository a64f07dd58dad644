"""Training the H-RAD classifier (SpecBranch): ``module`` (LightningModule + DataModule,
class-weighted CE). Network: ``specdec.nets.hrad``; labelled decoding steps:
``specdec.data.hrad``."""
