"""Training the SpecBlock feature drafter: ``losses``, ``warm`` (warm start from EAGLE-3),
``module`` (cross-block LightningModule, export). Network: ``specdec.nets.specblock``. Data:
EAGLE-3's traces and features (``specdec.data.features``). The decoding side is
``specdec.drafters.specblock``."""
