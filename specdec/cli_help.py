"""Text of ``python -m specdec.eval --help`` and ``python -m specdec.train --help``.

Hydra prints ``hydra.help.template`` (``conf/hydra/help/{eval,train}.yaml``); its OmegaConf
interpolations are resolved when Hydra reads it, so two resolvers (``register_resolvers``) fill
it from the config files themselves and the help cannot drift from them:

* ``${specdec_options:<group>}``: one line per option of a config group (``conf/<group>/*.yaml``)
  with the first statement of the file's leading comment;
* ``${specdec_keys:<primary>}``: one line per top-level key of ``conf/<primary>.yaml`` that carries
  an end-of-line comment (``key=default  meaning``), and the children of such a key.

Each help template names its own groups, so eval's help lists no train-only group and vice versa.
Hydra then substitutes ``$VARS`` in the text (``string.Template``), so a ``$`` from a config file
is doubled here.
"""

from __future__ import annotations

import re
from pathlib import Path

from specdec.paths import CONF_DIR

_KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_]\w*):(?P<value>[^#]*?)\s*(?:#\s*(?P<doc>.*))?$")


def _escape(text: str) -> str:
    return text.replace("$", "$$")


def describe(path: Path) -> str:
    """The first statement of a YAML file's leading comment (``# @package`` skipped; "" without
    one): its first line, joined with the next while a parenthesis is open, the text ends in
    ``, ; (``, or it ends in no ``.``/``:`` and the next line starts in lower case."""
    lines = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        text = line.lstrip("#").strip()
        if text and not text.startswith("@package"):
            lines.append(text)
    if not lines:
        return ""
    out = lines[0]
    for nxt in lines[1:]:
        open_paren = out.count("(") > out.count(")")
        cont = out.endswith((",", ";", "(")) or (nxt[:1].islower() and not out.endswith((".", ":")))
        if not (open_paren or cont):
            break
        out = f"{out} {nxt}"
    return out


def group_options(group: str, conf: Path = CONF_DIR) -> str:
    """``  <option>  <description>`` for every option of a config group, sorted by name.

    Raises:
        ValueError: when ``conf/<group>/`` holds no YAML file.
    """
    files = sorted((conf / group).glob("*.yaml"))
    if not files:
        raise ValueError(f"no config group {group!r} under {conf}; use a folder name of conf/")
    width = max(len(p.stem) for p in files)
    return "\n".join(_escape(f"  {p.stem:<{width}}  {describe(p)}".rstrip()) for p in files)


def primary_keys(name: str, conf: Path = CONF_DIR) -> str:
    """``  key=default  meaning`` for every commented top-level key of ``conf/<name>.yaml``.

    A commented key without a value (a mapping) lists its children as ``key.child=value``.
    Keys whose default is mandatory (``???``) or an interpolation are left out: presets and
    other keys set them.
    """
    rows: list[tuple[str, str]] = []
    parent: str | None = None
    for line in (conf / f"{name}.yaml").read_text().splitlines():
        m = _KEY.match(line)
        if m is None or m["key"] == "defaults":
            continue
        key, value, doc = m["key"], m["value"].strip(), (m["doc"] or "").strip()
        if not m["indent"]:
            parent = key if (not value and doc) else None
            if value and doc and value != "???" and not value.startswith("${"):
                rows.append((f"{key}={value}", doc))
            elif parent is not None:
                rows.append((f"{key}.*", doc))
        elif parent is not None and len(m["indent"]) == 2 and value:
            rows.append((f"{parent}.{key}={value}", doc))
    width = max((len(k) for k, _ in rows), default=0)
    return "\n".join(_escape(f"  {k:<{width}}  {d}".rstrip()) for k, d in rows)
