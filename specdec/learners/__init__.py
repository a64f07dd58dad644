"""Learners: one subpackage per learned part (its net, its data generation, its LightningModule)."""
