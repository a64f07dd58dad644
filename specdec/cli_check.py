"""The command line of an entry point, checked before ``@hydra.main`` composes it.

Hydra reports an override it cannot use (a typo in a group choice, a misspelt ``method=<name>``; a
key the config does not have, ``limt=3``; an override it cannot parse, ``limit=[1``) with its own
message or option dump and exit status 1, before the entry point's ``main`` runs, so
``errors.exit_on_input_error`` never sees it. ``check_command_line`` runs first, in the
``__main__`` block of ``specdec.eval`` and ``specdec.train``, and turns each of these into a
``BadInput`` naming the override and the fix:

* an override that does not parse: Hydra's reason and how to write one;
* a group choice (``method=``, ``model=``, ``benchmark=``, ``drafter/policy=``, ... and each value
  of a sweep ``-m method=<a>,<b>``) with no ``conf/<group>/<choice>.yaml``: the nearest names
  (``difflib``) and the group's options;
* a key the composed config does not have: the nearest keys of the node where its path leaves
  the config (``model.tagret.path``: the keys of ``model``); a placement key of the old flat
  spelling (``model.dtype=bfloat16``) names its key in the ``placement:`` node
  (``model.placement.dtype=bfloat16``, ``specdec.models.placement_config``);
* overrides after a flag (``a=1 -m b=2``: argparse's ``unrecognized arguments``): the command
  with every flag first;
* ``key={}`` on a mapping the preset fills: Hydra merges the empty mapping, which changes nothing;
* any other composition error Hydra raises (``ConfigCompositionException``), with its message.

Nothing runs for ``--help``, ``--cfg``, ``--info`` and the other Hydra flags, or with a config
other than the entry point's own (``--config-name``/``--config-path``/``--config-dir``).
``check_overrides`` is the same check on a list of overrides, for callers that compose the config
themselves (the Python API).
"""

from __future__ import annotations

import difflib

from omegaconf import DictConfig, OmegaConf

from specdec.config import compose_config
from specdec.errors import BadInput
from specdec.models.placement_config import moved, moved_error
from specdec.paths import CONF_DIR

SYNTAX = "https://hydra.cc/docs/advanced/override_grammar/basic/"


def suggest(word: str, names: list[str]) -> str:
    """``; did you mean 'a' or 'b'?`` for the names nearest ``word`` (empty when none is near)."""
    near = difflib.get_close_matches(word, names, n=3, cutoff=0.6)
    return f"; did you mean {' or '.join(map(repr, near))}?" if near else ""


def group_options(group: str) -> list[str] | None:
    """The choices of a config group (its YAML names under ``conf/<group>/``), or None when
    ``group`` is not a folder of ``conf/`` (Hydra's own groups, ``hydra/launcher``, included)."""
    folder = CONF_DIR / group
    if group.split("/")[0] == "hydra" or not folder.is_dir():
        return None
    return sorted(p.stem for p in folder.glob("*.yaml"))


def _parse(overrides: list[str]) -> list:
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    parser, out = OverridesParser.create(), []
    for text in overrides:
        try:
            out.extend(parser.parse_overrides([text]))
        except OverrideParseException as err:
            reason = str(err).splitlines()[0]
            raise BadInput(
                f"cannot parse the override {text!r} ({reason}); write key=value, "
                f"quoting a value with spaces or brackets ('key=\"a b\"'); see "
                f"{SYNTAX}"
            ) from None
    return out


def _values(override) -> list[str]:
    """The choices an override asks of a group (each element of a choice sweep)."""
    if override.is_delete():
        return []
    if override.is_sweep_override():
        try:
            return [str(v) for v in override.sweep_string_iterator()]
        except Exception:  # glob(...) and ranges need Hydra's loader: left to Hydra
            return []
    value = override.value()
    return [] if value is None else [str(value)]


def check_groups(overrides: list) -> None:
    """Refuse a group choice with no YAML file, suggesting the nearest names."""
    for override in overrides:
        group = override.key_or_group.replace(".", "/")
        options = group_options(group)
        if options is None:
            continue
        for value in _values(override):
            if value not in options:
                raise BadInput(
                    f"{override.key_or_group}={value} is not an option of conf/{group}/"
                    f"{suggest(value, options)} (options: {', '.join(options)})"
                )


def _missing_segment(base: DictConfig, key: str) -> BadInput | None:
    """The error for the first segment of a dotted ``key`` that its parent node lacks (a typo in a
    middle segment, ``model.tagret.path``, included), with the nearest keys of that parent; None
    when every segment is there or a segment's parent is not a mapping."""
    node: object = base
    parts = key.split(".")
    for i, part in enumerate(parts):
        if not isinstance(node, DictConfig):
            return None
        keys = [str(k) for k in node.keys()]  # keys() lists a missing (???) value too
        if part not in keys:
            parent = ".".join(parts[:i])
            where = f"{parent}." if parent else ""
            wrong = ".".join(parts[: i + 1])
            return BadInput(
                f"{wrong} is not a key of the config{suggest(part, keys)} (keys of "
                f"{parent or 'the top level'}: {', '.join(where + k for k in keys)})"
                f"; to add a new key write +{key}=..."
            )
        node = OmegaConf.select(
            node,
            part,
            throw_on_missing=False,  # a value ends the walk
            throw_on_resolution_failure=False,
        )
    return None


def _unknown_key(config_name: str, parsed: list, text: list[str]) -> None:
    """After a failed compose: refuse the first changed key the config lacks, with the nearest
    keys of the node where its path leaves the config (composed with the group choices only, so
    the preset's keys are there)."""
    groups = [
        t
        for o, t in zip(parsed, text, strict=True)
        if group_options(o.key_or_group.replace(".", "/")) is not None
    ]
    try:
        base = compose_config(config_name, groups, hydra_node=False)
    except Exception:
        return
    for override, line in zip(parsed, text, strict=True):
        key = override.key_or_group
        if override.is_add() or override.is_force_add() or override.is_delete():
            continue
        if key.startswith("hydra") or group_options(key.replace(".", "/")) is not None:
            continue
        if moved(key) is not None and OmegaConf.select(base, moved(key).rsplit(".", 1)[0]):
            raise moved_error(key, line.split("=", 1)[1] if "=" in line else None)
        error = _missing_segment(base, key)
        if error is not None:
            raise error


def _empty_merges(cfg: DictConfig, parsed: list) -> None:
    for override in parsed:
        if override.is_delete() or override.is_sweep_override():
            continue
        value = override.value()
        if isinstance(value, dict) and not value and not override.key_or_group.startswith("hydra"):
            got = OmegaConf.select(cfg, override.key_or_group)
            if isinstance(got, DictConfig) and len(got) > 0:
                key = override.key_or_group
                raise BadInput(
                    f"{key}={{}} merges an empty mapping into the preset's {key} "
                    f"({', '.join(map(str, got))}), which leaves it unchanged; to "
                    f"replace it write '~{key}' '+{key}={{name: ...}}'"
                )


def _first_job(override, text: str) -> str | None:
    """``text`` with a sweep replaced by its first value (None: a sweep only Hydra expands)."""
    if not override.is_sweep_override():
        return text
    values = _values(override)
    return f"{text.split('=', 1)[0]}={values[0]}" if values else None


def check_flag_order(argv: list[str], config_name: str) -> None:
    """Refuse overrides placed after a flag (``a=1 -m b=2``): Hydra's parser takes the overrides
    as one run of words and stops with ``unrecognized arguments``; name the command that works,
    every flag first."""
    from hydra._internal.utils import get_args_parser

    try:
        args, unknown = get_args_parser().parse_known_args(argv)
    except SystemExit:  # Hydra's own parser will say what is wrong
        return
    overrides = list(args.overrides)
    stray = [word for word in unknown if not word.startswith("-")]
    if not stray:
        return
    flags = [word for word in argv if word not in overrides and word not in stray]
    fixed = " ".join([f"python -m specdec.{config_name}", *flags, *overrides, *stray])
    raise BadInput(
        f"the overrides {' '.join(stray)} come after the flag {' '.join(flags)}, and "
        "Hydra reads only the overrides before a flag; put the flags first: "
        f"{fixed}"
    )


def check_command_line(argv: list[str], config_name: str) -> None:
    """Check an entry point's command line the way Hydra will read and compose it (see the module
    doc): overrides after a flag (``a=1 -m b=2``), then ``check_overrides``.

    Args:
        argv: the command's arguments (``sys.argv[1:]``).
        config_name: the entry point's config (``eval`` or ``train``).

    Raises:
        BadInput: naming the override and the fix.
    """
    from hydra._internal.utils import get_args_parser

    try:
        args, _ = get_args_parser().parse_known_args(argv)
    except SystemExit:  # Hydra's own parser will say what is wrong
        return
    if (
        args.help
        or args.hydra_help
        or args.cfg
        or args.info is not None
        or args.shell_completion
        or args.config_name
        or args.config_path
        or args.config_dir
        or args.experimental_rerun
    ):
        return
    check_flag_order(argv, config_name)
    check_overrides(list(args.overrides), config_name)


def check_overrides(overrides: list[str], config_name: str) -> None:
    """Check overrides the way Hydra will compose them: each parses, each group choice has a
    YAML file, each key is in the config (the nearest names suggested), no empty merge. The
    command line's check, and the one for any caller that composes overrides itself (the Python
    API's ``method=``, ``model=``, keys).

    Args:
        overrides: ``key=value`` strings (a sweep ``a,b`` is checked as its first job).
        config_name: the config they apply to (``eval`` or ``train``).

    Raises:
        BadInput: naming the override and the fix.
    """
    from hydra.errors import HydraException

    text = list(overrides)
    parsed = _parse(text)
    check_groups(parsed)
    job = ""
    if any(o.is_sweep_override() for o in parsed):  # compose the sweep's first job
        first = [_first_job(o, t) for o, t in zip(parsed, text, strict=True)]
        if None in first:  # glob(...): only Hydra's config loader expands it
            return
        job = (
            " (in the sweep's job "
            + " ".join(f for f, o in zip(first, parsed, strict=True) if o.is_sweep_override())
            + ")"
        )
        text, parsed = first, _parse(first)
    try:
        try:
            cfg = compose_config(config_name, text, hydra_node=False)
        except HydraException as err:
            _unknown_key(config_name, parsed, text)
            lines = [line.strip() for line in str(err).splitlines() if line.strip()] or [""]
            hint = (
                (
                    "; the Optuna search needs its sweeper plugin: pip install -e '.[sweep]' "
                    "(hydra-optuna-sweeper)"
                )
                if "hydra/sweeper/optuna" in str(err)
                else (f"; `python -m specdec.{config_name} --cfg job` shows the keys and values")
            )
            raise BadInput(f"the overrides do not compose: {lines[0]}{hint}") from None
        except Exception:  # not a composition error: @hydra.main reports it as before
            return
        _empty_merges(cfg, parsed)
    except BadInput as err:
        raise BadInput(f"{err}{job}") from None
