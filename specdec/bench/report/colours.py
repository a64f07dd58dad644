"""One colour per method, the same in every plot of every leaderboard.

A plot's colours must not depend on which rows it happens to draw: a method keeps its colour
between a two-method and a ten-method leaderboard, and between the speedup bars and the
acceptance curves. So a colour is a function of the method preset's name alone:

* the presets of ``conf/method/`` have a fixed colour (``PALETTE``; related presets share a hue
  family: the SpecBranch variants are greens, the HSD variants blues);
* any other name (a preset added later, a renamed run) gets a colour from the SHA-256 of its name
  (``hashed_colour``), stable across processes and machines (Python's ``hash`` is salted per
  process and is not used).

Rows of one method on one plot (``sps (<folder>)``) share the method's colour and differ by
hatch (bars) or line style (curves): ``styles``.
"""

from __future__ import annotations

import colorsys
import hashlib
from collections.abc import Iterable

#: fixed colours of the method presets (hex, matplotlib accepts them as they are)
PALETTE: dict[str, str] = {
    "ar": "#4d4d4d",
    "sps": "#1f77b4",
    "sps_heuristic": "#6baed6",
    "pld": "#ff7f0e",
    "pld_tree": "#fdae6b",
    "rrs": "#d62728",
    "rrs_tree": "#ff9896",
    "blockwise": "#8c564b",
    "adaedl": "#e377c2",
    "eagle3": "#9467bd",
    "eagle3_hsd": "#c5b0d5",
    "hsd": "#08306b",
    "hsd_code": "#2171b5",
    "hsd_multi": "#4292c6",
    "hsd_tree": "#9ecae1",
    "pearl": "#bcbd22",
    "specblock": "#17becf",
    "specblock_bandit": "#9edae5",
    "specbranch": "#2ca02c",
    "specbranch_no_branch": "#74c476",
    "specbranch_no_hrad": "#c7e9c0",
    "specdecpp": "#7f2704",
    "ssd": "#e6550d",
}
HATCHES = ("", "//", "\\\\", "xx", "..", "++")  # bars of the 2nd, 3rd, ... row of one method
LINESTYLES = ("-", "--", ":", "-.")  # curves of the 2nd, 3rd, ... row of one method


def hashed_colour(name: str) -> str:
    """A colour of medium lightness and saturation whose hue is read from SHA-256(``name``)."""
    digest = hashlib.sha256(name.encode()).digest()
    hue = int.from_bytes(digest[:4], "big") / 2**32
    lightness = 0.38 + 0.2 * digest[4] / 255  # 0.38 .. 0.58: visible on white, never grey
    red, green, blue = colorsys.hls_to_rgb(hue, lightness, 0.7)
    return "#" + "".join(f"{round(255 * c):02x}" for c in (red, green, blue))


def method_colour(method: str) -> str:
    """The colour of a method preset: ``PALETTE``'s, else ``hashed_colour``."""
    return PALETTE.get(method) or hashed_colour(method)


def styles(labels: Iterable[tuple[str, str]]) -> dict[str, tuple[str, int]]:
    """Per row label: its method's colour and its place among that method's labels (0 for the
    first, sorted; the index picks a hatch or line style).

    Args:
        labels: (row label, method preset) pairs, e.g. ``("sps (run_b)", "sps")``.
    """
    out: dict[str, tuple[str, int]] = {}
    seen: dict[str, int] = {}
    for label, method in sorted(set(labels)):
        if label in out:
            continue
        out[label] = (method_colour(method), seen.get(method, 0))
        seen[method] = seen.get(method, 0) + 1
    return out
