"""SpecBranch's H-RAD classifier: ``features`` (its input z_t, one function for training data and
serving), ``head`` (the 3-way MLP, save / load). Trained by ``specdec.learners.hrad``, read by
``specdec.drafters.specbranch``."""
