"""The H-RAD learner (SpecBranch): ``features`` (z_t), ``head`` (3-way MLP), ``data`` (labelled
decoding steps), ``module`` (LightningModule + DataModule, class-weighted CE)."""
