"""The small draft LM: ``net`` (reduced-vocabulary Llama draft), ``traces`` (target traces and the
draft token map), ``reference`` (reference-answer labelling), ``trace_dataset`` (batching),
``module`` (distillation LightningModule)."""
