"""The SpecDec++ acceptance-prediction head: ``head`` (nn.Module), ``data`` (labels from target
traces), ``module`` (LightningModule + DataModule, weighted BCE with token mixing)."""
