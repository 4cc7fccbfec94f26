"""Typed plugin and action arguments, read the way Volcano's ``Arguments`` getters read them.

A plugin declares a frozen dataclass ``Args``; each field maps to a YAML key (the field's
``metadata["key"]``, else its name). Volcano decodes the conf with gopkg.in/yaml.v2 into a
``map[string]interface{}`` and reads each key with ``GetInt``, ``GetFloat64``, ``GetBool`` or
``GetString`` (``pkg/scheduler/framework/arguments.go``): a value of another Go type is logged
and the default kept. :func:`parse_args` does the same and returns one warning naming the key,
the value and the default used. yaml.v2 gives an integer that int64 holds as ``int``, a larger
one as ``uint64`` (below 2**64) or ``float64``, and ``10.0`` as ``float64``; ``GetInt`` takes
only ``int``, ``GetFloat64`` ``float64`` or ``int``, so ``binpack.weight: 10.0`` and an integer
beyond Go's int keep the default.

A value of the right type that Volcano replaces (a negative ``ancestorReclaimLevel`` becomes 0)
or takes as given although it is surely a mistake (a negative weight) is dealt with by the
``Args``' ``__post_init__``, which records a warning with :func:`note` in its ``notes`` field
(:func:`notes_field`); :func:`parse_args` returns those too. Keys under a declared prefix
(``binpack.resources.<name>``) are gathered into the field marked ``extra``; any other unknown
key is a warning. :class:`ArgumentError` is left for what Lahar refuses outright (switches
Volcano refuses to start with together, Lahar's own placement settings).

Warnings name the argument but not its owner: the conf loader puts the file, the tier and the
plugin (or the ``configurations`` entry) in front of each.
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

__all__ = [
    "ArgumentError",
    "arg",
    "argument_keys",
    "closest",
    "extra_args",
    "is_go_int",
    "negative_weights",
    "note",
    "notes_field",
    "parse_args",
    "wrong_type",
    "yaml_text",
]

T = TypeVar("T")

_GO_INT = range(-(2**63), 2**63)
_GO_UINT64 = range(2**63, 2**64)


class ArgumentError(ValueError):
    """A value Lahar refuses: names the owner (plugin/action) and the key."""

    def __init__(self, owner: str, key: str, expected: str, value: object) -> None:
        super().__init__(f"{owner}: argument {key!r} must be {expected}, got {value!r}")
        self.owner = owner
        self.key = key


def arg(key: str, default: Any) -> Any:
    """A dataclass field read from YAML key ``key``."""
    return dataclasses.field(default=default, metadata={"key": key})


def extra_args(*prefixes: str) -> Any:
    """A ``dict[str, Any]`` field collecting every key that starts with one of ``prefixes``."""
    return dataclasses.field(default_factory=dict, metadata={"extra": prefixes})


def notes_field() -> Any:
    """The ``notes`` field of an ``Args`` whose ``__post_init__`` warns (see :func:`note`)."""
    return dataclasses.field(default=(), init=False, compare=False, repr=False)


def note(args: Any, message: str) -> None:
    """Record a warning about a value ``args.__post_init__`` accepted or replaced; the message
    names the argument (``argument 'k' is -1: …``)."""
    object.__setattr__(args, "notes", (*args.notes, message))


def is_go_int(value: Any) -> bool:
    """Whether Volcano's ``GetInt`` reads ``value``: an integer that Go's 64-bit int holds."""
    return isinstance(value, int) and not isinstance(value, bool) and value in _GO_INT


def yaml_text(value: Any) -> str:
    """``value`` as the conf would spell it: ``true``, ``10.0``, ``'heavy'``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return repr(value)


def argument_keys(cls: type) -> list[str]:
    """The YAML keys of ``cls``' fields (extra prefixes excluded)."""
    return [f.metadata.get("key", f.name) for f in dataclasses.fields(cls)
            if "extra" not in f.metadata and f.init]


def closest(word: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the known name most like ``word``, else ``""``."""
    match = difflib.get_close_matches(word, list(known), n=1, cutoff=0.75)
    return f" (did you mean {match[0]!r}?)" if match else ""


def negative_weights(args: Any, *names: str) -> None:
    """Note each of the fields ``names`` of ``args`` that is below 0: Volcano multiplies the
    score by it, so the nodes that score would prefer come last."""
    keys = {f.name: f.metadata.get("key", f.name) for f in dataclasses.fields(args)}
    for name in names:
        value = getattr(args, name)
        if value < 0:
            note(args, f"argument {keys[name]!r} is {value}: a negative weight turns that score "
                       f"around (the nodes it prefers come last); used as given, as in Volcano")


def listed_weights(args: Any, *, prefix: str, list_key: str, resources: str,
                   weights: Mapping[str, Any], negative: Callable[[str, int], int]
                   ) -> dict[str, int]:
    """Volcano's weights of listed resources (binpack's ``binpack.resources`` and the HyperNode
    binpack's): each name of the comma-separated ``resources`` weighs ``weights[prefix + name]``,
    1 when absent or not a Go int, ``negative(key, value)`` when below 0; a weight for a name
    not listed is noted and ignored."""
    listed = [n for n in (n.strip() for n in resources.split(",")) if n]
    out: dict[str, int] = {}
    for name in listed:
        key = prefix + name
        value = weights.get(key, 1)
        if not is_go_int(value):
            # GetInt keeps the resource's 1 for a value that is not a Go int
            note(args, wrong_type(key, value, "an integer", 1))
            value = 1
        out[name] = negative(key, value) if value < 0 else value
    for key in weights:
        if key[len(prefix):] not in listed:
            note(args, f"argument {key!r} is ignored: {key[len(prefix):]} is not listed in "
                       f"{list_key} (Volcano reads only the weights of those)")
    return out


def _read(annotation: Any, value: Any) -> tuple[bool, Any, str]:
    """``(readable, value read, what is expected)`` for ``value`` read as ``annotation``, by the
    rule of Volcano's getter for that Go type."""
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    if annotation is bool:
        return isinstance(value, bool), value, "true or false"
    if annotation is int:  # GetInt: value.(int)
        return is_go_int(value), value, "an integer"
    if annotation is float:  # GetFloat64: value.(float64), else value.(int)
        if isinstance(value, int) and is_number:
            if value in _GO_UINT64:  # yaml.v2's uint64: neither float64 nor int
                return False, value, "a number"
            try:  # beyond uint64, yaml.v2 reads a float64 unless it overflows
                return True, float(value), "a number"
            except OverflowError:
                return False, value, "a number"
        return isinstance(value, float), value, "a number"
    if annotation is str:  # GetString: value.(string)
        return isinstance(value, str), value, "a string"
    origin = typing.get_origin(annotation)
    if origin in (list, tuple):
        if isinstance(value, list | tuple):
            return True, tuple(value) if origin is tuple else list(value), "a list"
        return False, value, "a list"
    return True, value, ""


def wrong_type(key: str, value: Any, expected: str, default: Any) -> str:
    """The warning for a value of the wrong type: the key, the value and the default used."""
    beyond = ""
    if isinstance(value, int) and not isinstance(value, bool) and value not in _GO_INT:
        beyond = " (beyond the 64-bit integers Go's int holds)"
    used = "no value (the default)" if default in ("", None, (), []) \
        else f"the default {yaml_text(default)}"
    return f"argument {key!r} must be {expected}, got {yaml_text(value)}{beyond}; {used} is used"


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def parse_args(cls: type[T], arguments: Mapping[str, Any] | None) -> tuple[T, list[str]]:
    """Build ``cls`` from ``arguments``; returns the instance and the warnings: values of the
    wrong type (their default kept), unknown keys, and the ``Args``' own notes. An
    :class:`ArgumentError` raised by its ``__post_init__`` goes through."""
    arguments = dict(arguments or {})
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    warnings: list[str] = []
    extra_field: tuple[str, tuple[str, ...]] | None = None
    consumed: set[str] = set()
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if "extra" in f.metadata:
            extra_field = (f.name, f.metadata["extra"])
            continue
        if not f.init:
            continue
        key = f.metadata.get("key", f.name)
        if key not in arguments:
            continue
        consumed.add(key)
        readable, value, expected = _read(hints[f.name], arguments[key])
        if readable:
            values[f.name] = value
        else:
            warnings.append(wrong_type(key, arguments[key], expected, _default(f)))
    if extra_field is not None:
        name, prefixes = extra_field
        values[name] = {
            k: v
            for k, v in arguments.items()
            if k not in consumed and any(k.startswith(p) for p in prefixes)
        }
        consumed.update(values[name])
    known = argument_keys(cls)
    for key in arguments:
        if key not in consumed:
            warnings.append(f"unknown argument {key!r} ignored{closest(str(key), known)}")
    args = cls(**values)
    warnings.extend(getattr(args, "notes", ()))
    return args, warnings
