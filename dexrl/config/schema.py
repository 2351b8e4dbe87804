"""The value schema: every key the shipped configs set, its type, range or choices, and its use.

One table (:data:`SCHEMA`), generated from the typed settings (:mod:`dexrl.config.settings`,
whose fields carry each key's entry), read by :func:`check_values` (``dexrl validate``/``train``/
``doctor``/``resume``) and by ``dexrl validate --explain KEY``. A key pattern's ``*`` stands for
one level (``env.*`` is ``env.train`` and ``env.eval``).
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from dexrl.config.dotted import flatten
from dexrl.config.settings import Settings, is_type, schema_entries
from dexrl.errors import DexrlError, Finding


@dataclass(frozen=True)
class Interval:
    """A closed, open or half-open interval over the reals, written ``[1, inf)`` or ``(0, 1)``."""

    low: float
    high: float
    low_open: bool
    high_open: bool

    @classmethod
    def parse(cls, text: str) -> Interval:
        """Parse ``[a, b]`` / ``(a, b)`` / mixed; ``inf`` and ``-inf`` are allowed."""
        m = re.fullmatch(r"\s*([\[(])\s*(\S+)\s*,\s*(\S+)\s*([\])])\s*", text)
        if not m:
            raise ValueError(f"not an interval: {text!r}")
        return cls(float(m.group(2)), float(m.group(3)), m.group(1) == "(", m.group(4) == ")")

    def __contains__(self, value: float) -> bool:
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below

    def describe(self) -> str:
        """``≥ 1``, ``> 0``, ``in (0, 1)``, ``≤ 0``."""
        def num(x: float) -> str:
            return str(int(x)) if float(x).is_integer() else repr(x)

        if self.low == self.high:
            return f"= {num(self.low)}"
        if math.isinf(self.high):
            return f"{'>' if self.low_open else '≥'} {num(self.low)}"
        if math.isinf(self.low):
            return f"{'<' if self.high_open else '≤'} {num(self.high)}"
        return (f"in {'(' if self.low_open else '['}{num(self.low)}, {num(self.high)}"
                f"{')' if self.high_open else ']'}")


@dataclass(frozen=True)
class Key:
    """One config key.

    Attributes:
        pattern: Dotted key; ``*`` matches one level.
        type: ``int``, ``float`` (ints accepted), ``bool``, ``str``, ``list[str]``,
            ``list[float]``, ``list``, joined with ``|``; ``null`` allows null.
        meaning: What RLinf (or dexrl) does with it.
        range: Allowed numbers as an interval (``[1, inf)``), or None.
        choices: Allowed values (for a list, allowed items), or None.
        warn: ``(interval, message, hint)``: a legal value in that interval gets a warning
            ("<value> <message>").
    """

    pattern: str
    type: str
    meaning: str
    range: str | None = None
    choices: tuple[Any, ...] | None = None
    warn: tuple[str, str, str] | None = None

    def expected(self) -> str:
        """What a valid value looks like, in words."""
        if self.choices is not None:
            words = "one of " + ", ".join(_show(c) for c in self.choices)
            words = f"a list of items, each {words}" if self.type.startswith("list") else words
        else:
            words = " or ".join(_TYPE_WORDS[t] for t in self.type.split("|") if t != "null")
            if self.range:
                words += f" {Interval.parse(self.range).describe()}"
        return words + (" (or null)" if "null" in self.type.split("|") else "")


_TYPE_WORDS = {"int": "an integer", "float": "a number", "bool": "true or false",
               "str": "a string", "list[str]": "a list of strings",
               "list[float]": "a list of numbers", "list": "a list"}
SCHEMA: tuple[Key, ...] = tuple(
    Key(pattern, meta["type"], meta["meaning"], meta["range"], meta["choices"], meta["warn"])
    for pattern, meta in schema_entries(Settings))
"""Every key the settings describe (:mod:`dexrl.config.settings`), one entry per key pattern."""


def _show(value: Any) -> str:
    """A value as the user would write it in an override."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return repr(value) if isinstance(value, str) else str(value)


def _matches(pattern: str, key: str) -> bool:
    parts, pat = key.split("."), pattern.split(".")
    return len(parts) == len(pat) and all(p in ("*", k) for p, k in zip(pat, parts, strict=True))


_EXACT = {k.pattern: k for k in SCHEMA if "*" not in k.pattern}
_WILD = [k for k in SCHEMA if "*" in k.pattern]


def spec_for(key: str) -> Key | None:
    """The schema entry that describes a concrete dotted key (or a pattern itself)."""
    return _EXACT.get(key) or next((k for k in _WILD if _matches(k.pattern, key)), None)


def _fix(spec: Key, key: str, value: Any) -> str:
    """The fix for a value of the wrong type or out of range."""
    types = spec.type.split("|")
    if isinstance(value, str) and "bool" in types and value.lower() in ("true", "false"):
        return f"write {key}={value.lower()} without quotes"
    if isinstance(value, str) and ("int" in types or "float" in types):
        try:
            if math.isfinite(float(value)):
                return f"write {key}={value} without quotes"
        except ValueError:
            pass
    if isinstance(value, float) and "int" in types and value.is_integer():
        return f"write {key}={int(value)} (a whole number, no decimal point)"
    if isinstance(value, list) and spec.type.startswith("list") and spec.choices:
        return f"write a list, e.g. {key}=[{spec.choices[0]}]"
    if isinstance(value, str) and spec.type.startswith("list"):
        return f"write a list: {key}=[{value}]"
    return f"set {key} to {spec.expected()}; `dexrl validate --explain {key}` says what it does"


def check_value(spec: Key, key: str, value: Any) -> Finding | None:
    """One key's value against its schema entry: an error, a warning, or None."""
    if not any(is_type(t, value) for t in spec.type.split("|")):
        return Finding("error", key, f"got {_show(value)}, expected {spec.expected()}",
                       _fix(spec, key, value), code="config-value-wrong-type")
    if value is None:
        return None
    for item in (value if isinstance(value, list) else [value]) if spec.choices else []:
        if item not in spec.choices:
            close = difflib.get_close_matches(str(item), [str(c) for c in spec.choices], n=1,
                                              cutoff=0.5)
            listed = isinstance(value, list)
            got = f"the item {_show(item)}" if listed else _show(item)
            hint = f"`dexrl validate --explain {key}` says what each value does"
            if close:
                hint = f"did you mean {close[0] if listed else f'{key}={close[0]}'}?"
            return Finding("error", key, f"got {got}, expected {spec.expected()}", hint,
                           code="config-value-not-a-choice")
    number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if spec.range and number is not None and number not in Interval.parse(spec.range):
        return Finding("error", key, f"got {_show(value)}, expected {spec.expected()}",
                       _fix(spec, key, value), code="config-value-out-of-range")
    if spec.warn and number is not None and number in Interval.parse(spec.warn[0]):
        return Finding("warning", key, f"{_show(value)} {spec.warn[1]}", spec.warn[2],
                       code="config-value-surprising")
    return None


def _interpolated(value: Any) -> bool:
    return isinstance(value, str) and "${" in value


def check_values(cfg: Any) -> list[Finding]:
    """Every key of the config that the schema describes, against its type, range or choices.

    A key whose value is an interpolation (``${actor.model.precision}``) is checked where the
    value is written, so one bad value is one error.
    """
    findings = []
    try:
        OmegaConf.to_container(cfg, resolve=True)
        resolves = True
    except OmegaConfBaseException:
        resolves = False
    for key, value in flatten(OmegaConf.to_container(cfg, resolve=False)).items():
        if _interpolated(value):
            if resolves:
                continue
            try:
                OmegaConf.select(cfg, key)
            except OmegaConfBaseException as exc:
                findings.append(Finding("error", key, f"{value} does not resolve: "
                                        f"{str(exc).splitlines()[0]}",
                                        f"fix the interpolation, or set {key} to a value",
                                        code="config-does-not-resolve"))
            continue
        spec = spec_for(key)
        found = spec and check_value(spec, key, value)
        if found:
            findings.append(found)
    return findings


def explain(key: str, cfg: Any, config_name: str) -> list[str]:
    """Lines describing one key (or pattern): type, range or choices, value in ``cfg``, meaning.

    Raises:
        DexrlError: the schema does not describe the key; the hint names the closest keys.
    """
    spec = spec_for(key)
    present = flatten(OmegaConf.to_container(cfg, resolve=False))
    if spec is None:
        known = sorted({k for k in present if spec_for(k)} | {k.pattern for k in SCHEMA})
        close = difflib.get_close_matches(key, known, n=3, cutoff=0.6)
        where = "is in the config but not in dexrl's value schema" if key in present else \
            "is not a key dexrl knows"
        raise DexrlError(f"'{key}' {where}",
                         f"closest known keys: {', '.join(close)}" if close else
                         "`dexrl validate ... --print` shows every key of a config",
                         where="--explain", code="config-explain-unknown-key")
    lines = [spec.pattern if spec.pattern == key else f"{key} ({spec.pattern})",
             f"  type:     {spec.type}"]
    if spec.choices is not None:
        lines.append(f"  choices:  {', '.join(_show(c) for c in spec.choices)}")
    if spec.range:
        lines.append(f"  range:    {Interval.parse(spec.range).describe()}")
    if spec.warn:
        lines.append(f"  warning:  {Interval.parse(spec.warn[0]).describe()} {spec.warn[1]}")
    matches = [k for k in present if k == key or _matches(key, k)] or [key]
    for match in matches:
        value = OmegaConf.select(cfg, match, default="(not set)",
                                 throw_on_resolution_failure=False)
        stars = [m for p, m in zip(key.split("."), match.split("."), strict=True) if p == "*"]
        label = "default: " if len(matches) == 1 else f"{'.'.join(stars)}:"
        lines.append(f"  {label:<9} {_show(value)} (in {config_name})")
    lines.append(f"  meaning:  {spec.meaning}")
    return lines
