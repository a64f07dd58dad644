"""The three dataloaders of every learner's datamodule, from its one ``_loader(split, shuffle)``.

A datamodule (``L.LightningDataModule``) that subclasses ``SplitLoaders`` writes only how a split
becomes a ``DataLoader``; the training split is shuffled, validation and test are not, and
``test_split`` names what the test stage reads (``"validation"`` where a datamodule holds no
separate test split). ``learners/resumable.py`` wraps ``train_dataloader`` for mid-epoch resume.
"""

from __future__ import annotations

from torch.utils.data import DataLoader


class SplitLoaders:
    """``train_dataloader`` / ``val_dataloader`` / ``test_dataloader`` over ``_loader``."""

    test_split = "test"

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        raise NotImplementedError

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("validation", False)

    def test_dataloader(self) -> DataLoader:
        return self._loader(self.test_split, False)
