"""The text form of the latency models: :func:`parse_latency` reads what
``str(model)`` writes (the forms are listed in ``_latency.py``'s docstring)."""

from __future__ import annotations

import functools
import re

from ._latency import (
    Constant,
    LatencyModel,
    Pareto,
    PersistentSlowdown,
    RandomSlowdown,
    ShiftedExponential,
    Uniform,
)

_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}
_DURATION = re.compile(r"\s*([0-9.eE+-]+)\s*(s|ms|us)?\s*")
_BASE_FORMS = {
    "const": ("VALUE", 1),
    "uniform": ("LOW,HIGH", 2),
    "exp": ("MEAN", 1),
    "shifted-exp": ("SHIFT,MEAN", 2),
    "pareto": ("SCALE,SHAPE", 2),
    "shifted-pareto": ("SHIFT,SCALE,SHAPE", 3),
}


class _SpecError(ValueError):
    pass


def _duration(text: str) -> float:
    m = _DURATION.fullmatch(text)
    if not m:
        raise _SpecError(f"cannot read a duration (a number with s, ms or us) from "
                         f"{text!r}")  # fmt: skip
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


def _plain(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise _SpecError(f"cannot read a number from {text!r}") from None


def _base(text: str) -> LatencyModel:
    name, sep, args = text.strip().partition(":")
    if name not in _BASE_FORMS or not sep:
        forms = ", ".join(f"{n}:{a}" for n, (a, _) in _BASE_FORMS.items())
        raise _SpecError(f"expected a model {forms}, got {text.strip()!r}")
    parts = [a.strip() for a in args.split(",")]
    want, count = _BASE_FORMS[name]
    if len(parts) != count or not all(parts):
        raise _SpecError(f"{name} takes {name}:{want}, got {text.strip()!r}")
    if name == "const":
        return Constant(_duration(parts[0]))
    if name == "uniform":
        return Uniform(_duration(parts[0]), _duration(parts[1]))
    if name == "exp":
        return ShiftedExponential(0.0, _duration(parts[0]))
    if name == "shifted-exp":
        return ShiftedExponential(_duration(parts[0]), _duration(parts[1]))
    if name == "pareto":
        return Pareto(_duration(parts[0]), _plain(parts[1]))
    return Pareto(_duration(parts[1]), _plain(parts[2]), _duration(parts[0]))


def _modifier(model: LatencyModel, text: str) -> LatencyModel:
    keys: dict[str, str] = {}
    for tok in text.split():
        key, sep, value = tok.partition("=")
        if not sep or not value or key in keys:
            raise _SpecError(f"expected KEY=VALUE settings, got {text.strip()!r}")
        keys[key] = value
    if "slow" in keys:
        unknown = set(keys) - {"slow", "factor", "extra", "rack"}
        if unknown:
            raise _SpecError(
                f"a slow= modifier takes factor=, extra= and rack=, got "
                f"{sorted(unknown)}"
            )
        rack = keys.get("rack", "1")
        if not rack.isdigit():
            raise _SpecError(f"rack= must be a number of workers, got {rack!r}")
        return RandomSlowdown(
            model,
            prob=_plain(keys["slow"]),
            factor=_plain(keys.get("factor", "1")),
            extra=_base(keys["extra"]) if "extra" in keys else None,
            group_size=int(rack),
        )
    if "workers" in keys:
        unknown = set(keys) - {"workers", "factor"}
        if unknown or "factor" not in keys:
            raise _SpecError(
                f"a workers= modifier takes factor= (and nothing else), got "
                f"{sorted(keys)}"
            )
        try:
            ws = tuple(int(w) for w in keys["workers"].split(","))
        except ValueError:
            raise _SpecError(
                f"workers= must be worker indices I,J,..., got {keys['workers']!r}"
            ) from None
        return PersistentSlowdown(model, workers=ws, factor=_plain(keys["factor"]))
    raise _SpecError(
        f"expected a modifier 'slow=PROB ...' or 'workers=I,J factor=F', got "
        f"{text.strip()!r}"
    )


def parse_latency(spec: str) -> LatencyModel:
    """The latency model of a text spec (what ``str(model)`` writes).

    ``BASE[; MODIFIER]...``: a base model (durations in s, ms or us; default s)

    - ``const:VALUE``, ``uniform:LOW,HIGH``,
    - ``shifted-exp:SHIFT,MEAN`` (``exp:MEAN`` for shift 0),
    - ``pareto:SCALE,SHAPE``, ``shifted-pareto:SHIFT,SCALE,SHAPE``,

    then modifiers applied in turn:

    - ``slow=PROB [factor=F] [extra=BASE] [rack=G]``: :class:`RandomSlowdown`,
    - ``workers=I,J,... factor=F``: :class:`PersistentSlowdown`.

    Args:
        spec: the text, e.g. ``"shifted-exp:5ms,5ms; slow=0.05 extra=exp:100ms"``.

    Returns:
        The :class:`LatencyModel`.

    Raises:
        ValueError: text that does not follow the form, or parameters a model
            refuses (the message names the model and the parameter).
        TypeError: spec not a string.

    Examples:
        >>> import codedjax as cj
        >>> cj.parse_latency("shifted-exp:5ms,5ms")
        ShiftedExponential(shift=0.005, mean=0.005)
        >>> m = cj.parse_latency("shifted-exp:5ms,5ms; workers=0,1 factor=10")
        >>> cj.parse_latency(str(m)) == m
        True
    """
    if not isinstance(spec, str):
        raise TypeError(f"parse_latency: spec must be a string, got {spec!r}")
    return _parse(spec)


@functools.lru_cache(maxsize=256)
def _parse(spec: str) -> LatencyModel:
    base, *mods = spec.split(";")
    try:
        model = _base(base)
        for mod in mods:
            model = _modifier(model, mod)
    except (_SpecError, ValueError, TypeError) as err:
        msg = str(err)
        raise ValueError(f"parse_latency: {msg} (in {spec!r})") from None
    return model
