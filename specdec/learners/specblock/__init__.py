"""The SpecBlock feature drafter: ``slots`` (masks, slot attention, rank features), ``net`` (block
network, save/load), ``module`` (cross-block LightningModule, export). Data: EAGLE-3's cached
traces and features (``data.features``). The decoding side is ``specdec.drafters.specblock``.
"""
