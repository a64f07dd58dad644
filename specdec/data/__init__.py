"""Evaluation prompts and (later) training traces."""
