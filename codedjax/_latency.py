r"""Latency models: how long a worker takes, one vocabulary for the whole library.

Each model is a frozen dataclass (hashable, comparable by value) that samples

* on the host from a numpy ``Generator`` (:meth:`LatencyModel.sample`; the serving
  :class:`~codedjax.serving.Injector` draws worker i from a stream of its own), and
* from a jax key (:meth:`LatencyModel.sample_jax`, in float32; used by
  :func:`codedjax.sample_arrivals`).

Base distributions: :class:`Constant`, :class:`Uniform`, :class:`ShiftedExponential`,
:class:`Pareto` (with an optional shift). Stragglers on top of a base:
:class:`RandomSlowdown` (with probability p a worker, or a rack of consecutive
workers together, is slowed by a factor and/or an extra delay) and
:class:`PersistentSlowdown` (given workers are always slower). The last axis of a
sample is the worker axis (racks and persistent slowdowns refer to it).

:func:`parse_latency` (``_latency_text.py``) reads the text form that
``str(model)`` writes::

    shifted-exp:5ms,5ms                                  5 ms + Exp(mean 5 ms)
    shifted-pareto:5ms,1ms,1.5                           5 ms + Pareto(1 ms, 1.5)
    shifted-exp:5ms,5ms; slow=0.05 extra=exp:100ms       p = 0.05: + Exp(100 ms)
    shifted-exp:5ms,5ms; slow=0.05 extra=exp:100ms rack=5   racks of 5 together
    shifted-exp:5ms,5ms; workers=0,1 factor=10           workers 0, 1 always 10x

Parameters that make the model useless (every, or most, samples infinite in
float32, the dtype of :meth:`sample_jax`) are refused when the model is built.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

_F32_MAX = float(np.finfo(np.float32).max)


# ----------------------------------------------------------------------------------
# checks


def _number(fname: str, name: str, value: Any) -> float:
    if isinstance(value, (bool, np.bool_, str, bytes)):
        raise TypeError(f"{fname}: {name} must be a number, got {value!r}")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{fname}: {name} must be a number, got {value!r}") from None
    return v


def _nonneg(fname: str, name: str, value: Any, *, positive: bool = False) -> float:
    v = _number(fname, name, value)
    if not math.isfinite(v) or v < 0 or (positive and v == 0):
        need = "> 0" if positive else ">= 0"
        raise ValueError(f"{fname}: {name} must be finite and {need}, got {value!r}")
    return v


def _f32(fname: str, name: str, v: float) -> float:
    """A parameter the float32 sampler multiplies by must be a float32 number."""
    if v > _F32_MAX:
        raise ValueError(
            f"{fname}: {name} must be at most {_F32_MAX:.3g} (the float32 range that "
            f"sample_arrivals draws in), got {v!r}"
        )
    return v


def _finite_median(fname: str, name: str, median: float, formula: str) -> None:
    """Refuse parameters whose median sample overflows float32 (most samples would
    be infinite)."""
    if not median <= _F32_MAX:
        raise ValueError(
            f"{fname}: {name} makes most samples infinite: the median, {formula} = "
            f"{median:.3g} s, is beyond the float32 range ({_F32_MAX:.3g}) that "
            f"sample_arrivals draws in"
        )


def _set(obj, name, value):
    object.__setattr__(obj, name, value)


# ----------------------------------------------------------------------------------
# random streams


class Streams:
    """Where a model's host draws come from.

    ``get(part, index, depth)`` returns a numpy Generator: part 0 are the workers'
    base delays (index = worker), parts 1 and 3 a slowdown's events and extra delays
    (index = group), depth the nesting level of the slowdown. The injector seeds
    each from ``(seed, block, part, index[, depth])``, so worker i's delays do not
    depend on M; a plain Generator serves every draw (``shared``).
    """

    def __init__(self, get, shared: bool):
        self.get = get
        self.shared = shared

    @classmethod
    def of(cls, rng: np.random.Generator) -> Streams:
        return cls(lambda part, index, depth=0: rng, True)

    @classmethod
    def seeded(cls, words: tuple[int, ...]) -> Streams:
        def get(part, index, depth=0):
            tail = (part, index) if depth == 0 else (part, index, depth)
            return np.random.default_rng([*words, *tail])

        return cls(get, False)


def _rows(shape: tuple[int, ...]) -> tuple[int, int]:
    if len(shape) < 1:
        raise ValueError("sample: shape must end with the worker axis, got ()")
    return int(np.prod(shape[:-1], dtype=np.int64)), int(shape[-1])


# ----------------------------------------------------------------------------------
# the models


class LatencyModel:
    """Base class of the latency models (seconds).

    A subclass implements ``_columns(streams, rows, m, depth)`` (host draws
    [rows, M], float64) and ``_jax(key, shape)`` (``(offset, rel, order)``: the
    float32 sample is ``offset + rel``, ``offset`` a Python float common to every
    worker; ``order`` sorts like the sample, drawn before any rounding of the
    offset, so that a large common shift cannot tie the arrival order).
    """

    def sample(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        """float64 [*shape] service times (seconds) from a numpy Generator; the last
        axis is the workers."""
        shape = tuple(int(s) for s in shape)
        rows, m = _rows(shape)
        return self._columns(Streams.of(rng), rows, m, 0).reshape(shape)

    def sample_streams(
        self, streams: Streams, rows: int, num_workers: int
    ) -> np.ndarray:
        """float64 [rows, M] service times, worker i's column from its own stream
        (``Streams.seeded``: worker i's delays do not depend on M): the serving
        injector's draws."""
        return self._columns(streams, int(rows), int(num_workers), 0)

    def sample_jax(self, key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
        """float32 [*shape] service times from a jax key; the last axis is the
        workers."""
        offset, rel, _ = self._jax(key, tuple(int(s) for s in shape))
        return offset + rel

    def _columns(self, streams, rows, m, depth):
        # a model that defines only sample(rng, shape), i.i.d. over its entries:
        # worker i's column from worker i's stream
        del depth
        out = np.empty((rows, m))
        for i in range(m):
            out[:, i] = self.sample(streams.get(0, i), (rows,))
        return out

    def _jax(self, key, shape):
        raise NotImplementedError(
            f"{type(self).__name__} has no jax sampler (_jax); sample_arrivals needs "
            f"one"
        )

    def _median(self) -> float | None:
        """The median sample in seconds (None: unknown, for a model of the
        user's own); a slowdown checks that it cannot overflow float32."""
        return None

    def __str__(self) -> str:
        return self.spec()


def _fmt(v: float) -> str:
    return repr(float(v))


@dataclasses.dataclass(frozen=True)
class Constant(LatencyModel):
    """Every worker takes exactly ``value`` seconds.

    Text form: ``const:VALUE``.
    """

    value: float

    def __post_init__(self):
        _set(self, "value", _nonneg("Constant", "value", self.value))
        _finite_median("Constant", "value", self.value, "value")

    def spec(self) -> str:
        return f"const:{_fmt(self.value)}"

    def _median(self) -> float:
        return self.value

    def _columns(self, streams, rows, m, depth):
        return np.full((rows, m), self.value)

    def _jax(self, key, shape):
        del key
        zero = jnp.zeros(shape, jnp.float32)
        return self.value, zero, zero


@dataclasses.dataclass(frozen=True)
class Uniform(LatencyModel):
    """Service time uniform on [low, high) seconds: with low = 0, high = 1 a
    uniformly random arrival order.

    Text form: ``uniform:LOW,HIGH``.
    """

    low: float
    high: float

    def __post_init__(self):
        lo = _nonneg("Uniform", "low", self.low)
        hi = _nonneg("Uniform", "high", self.high)
        if not hi > lo:
            raise ValueError(f"Uniform: need high > low, got low={lo}, high={hi}")
        _finite_median("Uniform", "high", (lo + hi) / 2, "(low + high) / 2")
        _set(self, "low", lo)
        _set(self, "high", hi)

    def spec(self) -> str:
        return f"uniform:{_fmt(self.low)},{_fmt(self.high)}"

    def _median(self) -> float:
        return (self.low + self.high) / 2

    def _columns(self, streams, rows, m, depth):
        if streams.shared:
            return streams.get(0, 0).uniform(self.low, self.high, (rows, m))
        out = np.empty((rows, m))
        for i in range(m):
            out[:, i] = streams.get(0, i).uniform(self.low, self.high, rows)
        return out

    def _jax(self, key, shape):
        u = jax.random.uniform(key, shape)
        width = self.high - self.low
        return self.low, (u if width == 1.0 else width * u), u


@dataclasses.dataclass(frozen=True)
class ShiftedExponential(LatencyModel):
    r"""Service time ``shift + Exp(mean)`` seconds.

    .. math:: T = s + E, \qquad E \sim \mathrm{Exp}(\text{mean } \mu).

    Text form: ``shifted-exp:SHIFT,MEAN`` (``exp:MEAN`` for shift 0).

    References:
        K. Lee et al., Speeding up distributed machine learning using codes, IEEE
        Trans. Inf. Theory 64(3), 2018, arXiv:1512.02673 (the shifted-exponential
        model of coded computing).
    """

    shift: float
    mean: float

    def __post_init__(self):
        s = _nonneg("ShiftedExponential", "shift", self.shift)
        mu = _nonneg("ShiftedExponential", "mean", self.mean, positive=True)
        _f32("ShiftedExponential", "mean", mu)
        _finite_median(
            "ShiftedExponential", "shift or mean", s + mu * math.log(2),
            "shift + mean ln 2",
        )  # fmt: skip
        _set(self, "shift", s)
        _set(self, "mean", mu)

    def spec(self) -> str:
        return f"shifted-exp:{_fmt(self.shift)},{_fmt(self.mean)}"

    def _median(self) -> float:
        return self.shift + self.mean * math.log(2)

    def _columns(self, streams, rows, m, depth):
        if streams.shared:
            e = streams.get(0, 0).exponential(1.0, (rows, m))
            return self.shift + self.mean * e
        out = np.empty((rows, m))
        for i in range(m):
            out[:, i] = self.shift + self.mean * streams.get(0, i).exponential(
                1.0, rows
            )
        return out

    def _jax(self, key, shape):
        # the order comes from the exponential parts (the shift is common to every
        # worker), so a large shift cannot tie the latencies in float32
        e = jax.random.exponential(key, shape)
        return self.shift, (e if self.mean == 1.0 else e * self.mean), e


@dataclasses.dataclass(frozen=True)
class Pareto(LatencyModel):
    r"""Heavy-tailed service time ``shift + scale * P`` seconds, P ~ Pareto(shape).

    .. math:: \Pr[T - s > t] = (t / c)^{-a}, \qquad t \ge c,

    with ``s = shift``, ``c = scale`` and ``a = shape`` (the tail index: a <= 1 has
    no mean, a <= 2 no variance).

    Text form: ``pareto:SCALE,SHAPE``, or ``shifted-pareto:SHIFT,SCALE,SHAPE``.

    Raises:
        ValueError: a scale or shape that is not finite and > 0, a negative
            shift, or parameters whose median ``shift + scale 2^(1/shape)``
            overflows float32 (a shape of 1e-3 makes most samples infinite).
    """

    scale: float
    shape: float
    shift: float = 0.0

    def __post_init__(self):
        c = _nonneg("Pareto", "scale", self.scale, positive=True)
        a = _nonneg("Pareto", "shape", self.shape, positive=True)
        s = _nonneg("Pareto", "shift", self.shift)
        med = _pareto_median(s, c, a)
        _finite_median("Pareto", "shape", med, "shift + scale * 2^(1/shape)")
        _set(self, "scale", c)
        _set(self, "shape", a)
        _set(self, "shift", s)

    def spec(self) -> str:
        if self.shift == 0:
            return f"pareto:{_fmt(self.scale)},{_fmt(self.shape)}"
        return (
            f"shifted-pareto:{_fmt(self.shift)},{_fmt(self.scale)},{_fmt(self.shape)}"
        )

    def _median(self) -> float:
        return _pareto_median(self.shift, self.scale, self.shape)

    def _columns(self, streams, rows, m, depth):
        # numpy's pareto is Lomax (support from 0): shift it to start at 1
        if streams.shared:
            p = streams.get(0, 0).pareto(self.shape, (rows, m))
            return self.shift + self.scale * (1.0 + p)
        out = np.empty((rows, m))
        for i in range(m):
            p = streams.get(0, i).pareto(self.shape, rows)
            out[:, i] = self.shift + self.scale * (1.0 + p)
        return out

    def _jax(self, key, shape):
        u = jax.random.uniform(key, shape, minval=jnp.finfo(jnp.float32).tiny)
        # the order comes from U (T decreases in U), so latencies that overflow to
        # inf in float32 cannot tie it
        return self.shift, self.scale * u ** (-1.0 / self.shape), -u


def _pareto_median(shift: float, scale: float, shape: float) -> float:
    try:
        return shift + scale * 2.0 ** (1.0 / shape)
    except OverflowError:
        return math.inf


def _slowed_median(fname, name, base, factor, extra=None) -> float | None:
    """The median of a slowed worker's sample, ``factor`` times the base's plus
    the extra delay's; refused when it overflows float32 (every slowed sample
    would be infinite)."""
    med = base._median()
    if med is None:
        return None
    x = 0.0 if extra is None else extra._median()
    if x is None:
        return None
    slowed = factor * med + x
    formula = "a slowed worker's factor * median(base)" + (
        "" if extra is None else " + median(extra)"
    )
    _finite_median(fname, name, slowed, formula)
    return slowed


def _check_model(fname: str, name: str, model: Any) -> LatencyModel:
    if not isinstance(model, LatencyModel):
        raise TypeError(
            f"{fname}: {name} must be a latency model (codedjax.ShiftedExponential, "
            f"Pareto, Constant, Uniform, RandomSlowdown, PersistentSlowdown), got "
            f"{type(model).__name__}"
        )
    return model


@dataclasses.dataclass(frozen=True)
class RandomSlowdown(LatencyModel):
    r"""Stragglers at random: with probability ``prob`` a worker is slowed.

    A slowed worker takes ``factor * T + X`` instead of T (T from ``base``, X from
    ``extra``, 0 without one). With ``group_size`` g > 1 the workers ``i // g``
    form racks of g consecutive workers that are slowed together, by one draw of
    X per rack.

    Text form: ``BASE; slow=PROB [factor=F] [extra=MODEL] [rack=G]`` (``extra`` a
    base model's text form).

    Examples:
        5 ms + Exp(5 ms), and with probability 0.05 a further Exp(mean 100 ms):
        ``RandomSlowdown(ShiftedExponential(0.005, 0.005), prob=0.05,
        extra=ShiftedExponential(0.0, 0.1))``.

    Raises:
        ValueError: prob outside [0, 1], a factor that is not finite and > 0, a
            slowdown that changes nothing (factor 1 and no extra), group_size < 1.
        TypeError: base or extra not a latency model.
    """

    base: LatencyModel
    prob: float
    factor: float = 1.0
    extra: LatencyModel | None = None
    group_size: int = 1

    def __post_init__(self):
        fname = "RandomSlowdown"
        _check_model(fname, "base", self.base)
        if self.extra is not None:
            _check_model(fname, "extra", self.extra)
        p = _nonneg(fname, "prob", self.prob)
        if p > 1:
            raise ValueError(f"{fname}: prob must be in [0, 1], got {self.prob!r}")
        f = _f32(fname, "factor", _nonneg(fname, "factor", self.factor, positive=True))
        g = self.group_size
        if isinstance(g, bool) or not isinstance(g, (int, np.integer)) or g < 1:
            raise ValueError(f"{fname}: group_size must be an int >= 1, got {g!r}")
        if f == 1.0 and self.extra is None:
            raise ValueError(
                f"{fname}: a slowdown needs factor != 1 or an extra delay, got "
                f"factor=1 and extra=None"
            )
        _slowed_median(fname, "factor" if self.extra is None else "factor or extra",
                       self.base, f, self.extra)  # fmt: skip
        _set(self, "prob", p)
        _set(self, "factor", f)
        _set(self, "group_size", int(g))

    def spec(self) -> str:
        head = self.base.spec()
        parts = [f"slow={_fmt(self.prob)}"]
        if self.factor != 1.0:
            parts.append(f"factor={_fmt(self.factor)}")
        if self.extra is not None:
            parts.append(f"extra={self.extra.spec()}")
        if self.group_size != 1:
            parts.append(f"rack={self.group_size}")
        return f"{head}; {' '.join(parts)}"

    def _median(self) -> float | None:
        if self.prob <= 0.5:
            return self.base._median()
        return _slowed_median(type(self).__name__, "factor", self.base, self.factor,
                              self.extra)  # fmt: skip

    def _columns(self, streams, rows, m, depth):
        t = self.base._columns(streams, rows, m, depth + 1)
        groups = -(-m // self.group_size)
        if streams.shared:
            slow_g = streams.get(1, 0, depth).random((rows, groups)) < self.prob
        else:
            slow_g = np.empty((rows, groups), bool)
            for g in range(groups):
                slow_g[:, g] = streams.get(1, g, depth).random(rows) < self.prob
        slow = np.repeat(slow_g, self.group_size, axis=1)[:, :m]
        out = np.where(slow, t * self.factor, t) if self.factor != 1.0 else t
        if self.extra is not None:
            if streams.shared:
                x_g = self.extra._columns(streams, rows, groups, depth + 1)
            else:
                sub = Streams(
                    lambda part, index, d=0: streams.get(3 + part, index, depth + d),
                    False,
                )
                x_g = self.extra._columns(sub, rows, groups, 0)
            x = np.repeat(x_g, self.group_size, axis=1)[:, :m]
            out = np.where(slow, out + x, out)
        return out

    def _jax(self, key, shape):
        k_base, k_event, k_extra = jax.random.split(key, 3)
        off, rel, _ = self.base._jax(k_base, shape)
        m = shape[-1]
        groups = -(-m // self.group_size)
        gshape = shape[:-1] + (groups,)
        slow = jax.random.bernoulli(k_event, self.prob, gshape)
        slow = jnp.repeat(slow, self.group_size, axis=-1)[..., :m]
        # a slowed worker: factor (off + rel) + X = off + [(factor - 1) off +
        # factor rel + X]
        slowed = (self.factor - 1.0) * off + self.factor * rel
        if self.extra is not None:
            x_off, x_rel, _ = self.extra._jax(k_extra, gshape)
            x = jnp.repeat(x_off + x_rel, self.group_size, axis=-1)[..., :m]
            slowed = slowed + x
        rel = jnp.where(slow, slowed, rel)
        return off, rel, rel


@dataclasses.dataclass(frozen=True)
class PersistentSlowdown(LatencyModel):
    """Given workers are ``factor`` times slower on every request.

    ``workers`` are worker indices; negative ones count from the last worker (-1
    is worker M - 1), so ``(0, -1)`` slows the two end workers whatever M is;
    indices beyond M are ignored.

    Text form: ``BASE; workers=I,J,... factor=F``.

    Examples:
        Two workers of every M ten times slower:
        ``PersistentSlowdown(ShiftedExponential(0.005, 0.005), workers=(0, 1),
        factor=10.0)``.

    Raises:
        ValueError: no workers, a factor that is not finite and > 0.
        TypeError: base not a latency model, a worker index that is not an int.
    """

    base: LatencyModel
    workers: tuple[int, ...]
    factor: float

    def __post_init__(self):
        fname = "PersistentSlowdown"
        _check_model(fname, "base", self.base)
        try:
            ws = tuple(self.workers)
        except TypeError:
            raise TypeError(
                f"{fname}: workers must be a tuple of worker indices, got "
                f"{self.workers!r}"
            ) from None
        for w in ws:
            if isinstance(w, bool) or not isinstance(w, (int, np.integer)):
                raise TypeError(f"{fname}: workers must be ints, got {w!r}")
        if not ws:
            raise ValueError(f"{fname}: workers must name at least one worker")
        _set(self, "workers", tuple(int(w) for w in ws))
        f = _f32(fname, "factor", _nonneg(fname, "factor", self.factor, positive=True))
        _slowed_median(fname, "factor", self.base, f)
        _set(self, "factor", f)

    def spec(self) -> str:
        ws = ",".join(str(w) for w in self.workers)
        return f"{self.base.spec()}; workers={ws} factor={_fmt(self.factor)}"

    def _median(self) -> float | None:
        return self.base._median()  # most workers are not slowed

    def slow(self, m: int) -> np.ndarray:
        """bool [M]: the slowed workers among M."""
        out = np.zeros(m, bool)
        for w in self.workers:
            if -m <= w < m:
                out[w] = True
        return out

    def _columns(self, streams, rows, m, depth):
        t = self.base._columns(streams, rows, m, depth + 1)
        return np.where(self.slow(m)[None, :], t * self.factor, t)

    def _jax(self, key, shape):
        off, rel, _ = self.base._jax(key, shape)
        slow = jnp.asarray(self.slow(shape[-1]))
        rel = jnp.where(slow, (self.factor - 1.0) * off + self.factor * rel, rel)
        return off, rel, rel
