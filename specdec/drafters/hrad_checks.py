"""SpecBranch's H-RAD head loaded for decoding and checked against what it serves.

``load_head`` loads the head (``nets.hrad.head``) onto the target's device, since it reads the
target's features, and warns when it was trained for another draft length than the policy's
γ_max; ``warn_temperature`` warns when the run samples at another temperature than the labels'
(acceptance lengths, so its classes, depend on both). ``drafters.specbranch`` calls them.
"""

from __future__ import annotations

import logging
from pathlib import Path

from specdec.models.placement import Placement
from specdec.models.retrain import experiment_of, export_args
from specdec.nets.hrad.head import HradHead, load_hrad

log = logging.getLogger(__name__)


def load_head(hrad: str, gamma: int, placement: Placement | None) -> HradHead:
    """The head at ``hrad`` placed for ``features`` in its own dtype (``placement``: the pair's,
    default the CPU); warns when its ``gamma_max`` is not ``gamma``."""
    # errors name the experiment that trains it (hrad_<model> for a folder named after a
    # preset's pair) with the export overrides that write this very folder
    head = (placement or Placement.cpu()).place(
        load_hrad(
            Path(hrad), experiment=f"{experiment_of('hrad', hrad)} {export_args(hrad)}".strip()
        ),
        "features",
        cast=False,
    )
    trained = head.meta.get("gamma_max")
    if trained is not None and int(trained) != gamma:
        # class 2 means "all gamma_max accepted": a head labelled with another length
        # predicts a different event than the one this draft length needs
        log.warning(
            "drafter.hrad %s was trained with gamma_max=%s but "
            "drafter.policy.gamma=%d: its classes 0 / 1..%d / %d describe another "
            "draft length; set drafter.policy.gamma=%s or train a head with "
            "hrad.gamma_max=%d",
            hrad,
            trained,
            gamma,
            int(trained) - 1,
            int(trained),
            trained,
            gamma,
        )
    return head


def warn_temperature(head: HradHead, hrad: str | None, temperature: float) -> None:
    """Warn when the head's labels were made at another temperature than ``temperature``."""
    labelled = (head.meta.get("sampling") or {}).get("temperature")
    if labelled is not None and float(labelled) != temperature:
        log.warning(
            "drafter.hrad %s was labelled at temperature %s but this run samples "
            "at %s; its classes may be miscalibrated (train a head at this "
            "temperature: sampling.temperature in the hrad experiment)",
            hrad,
            labelled,
            temperature,
        )
