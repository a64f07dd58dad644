"""A stand-in for the ``wandb`` module where only the calls matter: ``FakeWandb`` (``Artifact``,
``Table``, ``Image``, ``init``) and the ``FakeRun`` it starts, which keeps what was logged, used
and put in its history. The W&B tests of the harness hand it to the code under test.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace


class FakeArtifact:
    def __init__(self, name, type, metadata):
        self.name, self.type, self.metadata, self.files = name, type, metadata, []

    def add_file(self, path, name):
        self.files.append((Path(path).read_text(), name))

    def add_dir(self, path):
        self.files += sorted(p.name for p in Path(path).iterdir())


class FakeTable:
    def __init__(self, dataframe):
        self.columns, self.data = list(dataframe.columns), dataframe.values.tolist()


class FakeWandb:
    Artifact, Table = FakeArtifact, FakeTable
    Image = staticmethod(lambda path, caption: ("image", Path(path).name, caption))

    @staticmethod
    def init(**settings):
        return FakeRun()


class FakeRun:
    def __init__(self):
        self.logged, self.used, self.history = [], [], []
        self.config = SimpleNamespace(update=lambda config, allow_val_change: None)

    def log_artifact(self, artifact):
        self.logged.append(artifact)

    def use_artifact(self, artifact):
        self.used.append(artifact)
        return artifact

    def log(self, values):
        self.history.append(values)
