"""DCNv2 (Deep & Cross Network v2) in Flax NNX.

.. math::

    x_0 &= [e_1(c_1), \\dots, e_{n}(c_{n}), \\text{numeric}] \\in \\mathbb{R}^{d_0} \\\\
    x_{l+1} &= x_0 \\odot (W_l x_l + b_l) + x_l, \\qquad l = 0..L-1 \\\\
    \\text{parallel:}\\quad z &= w_c^\\top x_L + w_d^\\top \\mathrm{deep}(x_0) + b \\\\
    \\text{stacked:}\\quad z &= w^\\top \\mathrm{deep}(x_L) + b

The cross layer has no ``diag_scale`` term and no nonlinearity, so ``x_L`` (and the
linear head ``w_c . x_L``) is a polynomial of degree L + 1 in ``x_0``; a low-rank
``W_l = U_l V_l^T`` keeps that degree. This is what lets coded inference recover the
Cross branch exactly (Lagrange coded computing) while the ReLU Deep branch is served
by replication (RepApprox).

Numeric fields enter ``x_0`` either as their (normalised) values
(``numeric_mode="normalised"``, one column each) or as value times a learned vector
(``"embedded"``, ``embed_dim`` columns each). Categorical ids outside
``[0, vocab_size)`` are mapped to the out-of-vocabulary slot 0.

Precision follows Flax: ``param_dtype`` is the storage dtype of the parameters;
``dtype`` is the compute dtype, and ``None`` (default) infers it from the inputs and
parameters, so a model whose parameters and numeric inputs are cast to bfloat16 (see
:func:`cast_floating`) computes in bfloat16 throughout.

References:
  Wang, R. et al. (2021), DCN V2: Improved Deep & Cross Network and Practical Lessons
  for Web-scale Learning to Rank Systems, WWW 2021, arXiv:2008.13535.
  Wang, R., Fu, B., Fu, G. & Wang, M. (2017), Deep & Cross Network for Ad Click
  Predictions, ADKDD 2017, arXiv:1708.05123.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from runkit import check_fields

__all__ = ["DCNConfig", "DCNv2", "CrossLayer", "cast_floating"]

NUMERIC_MODES = ("normalised", "embedded")
STRUCTURES = ("parallel", "stacked")
PRECISIONS = ("default", "high", "highest")


def _dtype_name(value) -> str | None:
    return None if value is None else jnp.dtype(value).name


@dataclasses.dataclass(frozen=True)
class DCNConfig:
    """Static description of a DCNv2 model.

    Attributes:
      vocab_sizes: embedding table size per categorical field (slot 0 = OOV).
      num_numeric: number of numeric fields.
      embed_dim: embedding dimension of every categorical field.
      numeric_mode: ``"normalised"`` (the value itself is one input column) or
        ``"embedded"`` (value times a learned ``embed_dim`` vector).
      num_cross_layers: L, the number of cross layers (Cross branch degree L + 1).
      low_rank: ``None`` for full-rank ``W_l`` [d0, d0], else the rank r of
        ``W_l = U_l V_l^T``.
      deep_sizes: hidden widths of the ReLU MLP.
      structure: ``"parallel"`` or ``"stacked"``.
      dtype: compute dtype name, or ``None`` to infer from inputs and parameters.
      param_dtype: parameter storage dtype name.
      precision: ``None`` or a ``jax.lax.Precision`` name (``"highest"`` avoids TF32
        float32 matmuls on GPU).
    """

    vocab_sizes: tuple[int, ...]
    num_numeric: int
    embed_dim: int = 8
    numeric_mode: str = "normalised"
    num_cross_layers: int = 2
    low_rank: int | None = None
    deep_sizes: tuple[int, ...] = (128, 64)
    structure: str = "parallel"
    dtype: str | None = None
    param_dtype: str = "float32"
    precision: str | None = None

    def __post_init__(self):
        name = "DCNConfig"
        object.__setattr__(self, "vocab_sizes", tuple(int(v) for v in self.vocab_sizes))
        object.__setattr__(self, "deep_sizes", tuple(int(v) for v in self.deep_sizes))
        object.__setattr__(self, "dtype", _dtype_name(self.dtype))
        object.__setattr__(self, "param_dtype", _dtype_name(self.param_dtype))
        if any(v < 1 for v in self.vocab_sizes):
            raise ValueError(
                f"{name}: vocab_sizes must be >= 1, got {self.vocab_sizes}"
            )
        if self.num_numeric < 0 or self.embed_dim < 1:
            raise ValueError(
                f"{name}: need num_numeric >= 0 and embed_dim >= 1, got "
                f"{self.num_numeric} and {self.embed_dim}"
            )
        if not self.vocab_sizes and self.num_numeric == 0:
            raise ValueError(f"{name}: the model needs at least one input field")
        check_fields(
            name, self, one_of={"numeric_mode": NUMERIC_MODES, "structure": STRUCTURES},
            at_least={"num_cross_layers": 0}, or_none={"low_rank": 1},
        )  # fmt: skip
        if self.precision is not None and self.precision not in PRECISIONS:
            raise ValueError(
                f"{name}: precision must be None or one of {PRECISIONS}, got "
                f"{self.precision!r}"
            )
        if any(h < 1 for h in self.deep_sizes):
            raise ValueError(f"{name}: deep_sizes must be >= 1, got {self.deep_sizes}")
        if self.structure == "stacked" and not self.deep_sizes:
            raise ValueError(f"{name}: the stacked structure needs deep_sizes")

    @property
    def input_dim(self) -> int:
        """d0, the width of x_0."""
        per_numeric = 1 if self.numeric_mode == "normalised" else self.embed_dim
        return len(self.vocab_sizes) * self.embed_dim + self.num_numeric * per_numeric

    @property
    def cross_degree(self) -> int:
        """Degree L + 1 of the Cross branch as a polynomial of x_0."""
        return self.num_cross_layers + 1

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (lists for tuples)."""
        out = dataclasses.asdict(self)
        out["vocab_sizes"] = list(self.vocab_sizes)
        out["deep_sizes"] = list(self.deep_sizes)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DCNConfig:
        return cls(**d)


class CrossLayer(nnx.Module):
    """One DCNv2 cross layer, ``x0 * (W x + b) + x`` with ``W`` full or ``U V^T``.

    Args:
      dim: d0.
      low_rank: ``None`` or the rank r.
      dtype, param_dtype, precision: as in ``nnx.Linear``.
      rngs: parameter initialisation keys.
    """

    def __init__(
        self,
        dim: int,
        *,
        low_rank: int | None,
        dtype,
        param_dtype,
        precision,
        rngs: nnx.Rngs,
    ):
        init = nnx.initializers.glorot_uniform()
        kw = dict(
            dtype=dtype,
            param_dtype=param_dtype,
            precision=precision,
            kernel_init=init,
            rngs=rngs,
        )
        if low_rank is None:
            self.down = None
            self.up = nnx.Linear(dim, dim, use_bias=True, **kw)
        else:
            self.down = nnx.Linear(dim, low_rank, use_bias=False, **kw)  # V^T
            self.up = nnx.Linear(low_rank, dim, use_bias=True, **kw)  # U, b

    def __call__(self, x0: jax.Array, x: jax.Array) -> jax.Array:
        h = x if self.down is None else self.down(x)
        return x0 * self.up(h) + x


class DCNv2(nnx.Module):
    """DCNv2 with parallel or stacked structure.

    Shapes: B queries, ``n_cat = len(vocab_sizes)``, ``n_num = num_numeric``,
    ``d0 = config.input_dim``.

    Args:
      config: a :class:`DCNConfig`.
      rngs: ``nnx.Rngs`` for parameter initialisation.

    Example:
      >>> import jax.numpy as jnp
      >>> from flax import nnx
      >>> cfg = DCNConfig(vocab_sizes=(5, 7), num_numeric=3, deep_sizes=(16,))
      >>> model = DCNv2(cfg, rngs=nnx.Rngs(0))
      >>> ids = jnp.zeros((4, 2), jnp.int32); num = jnp.ones((4, 3))
      >>> model(ids, num).shape
      (4,)
    """

    def __init__(self, config: DCNConfig, *, rngs: nnx.Rngs):
        self.config = config
        dtype = None if config.dtype is None else jnp.dtype(config.dtype)
        pdt = jnp.dtype(config.param_dtype)
        prec = (
            None
            if config.precision is None
            else jax.lax.Precision[config.precision.upper()]
        )
        d0 = config.input_dim
        self.embeddings = nnx.List(
            [
                nnx.Embed(v, config.embed_dim, dtype=dtype, param_dtype=pdt, rngs=rngs)
                for v in config.vocab_sizes
            ]
        )
        if config.numeric_mode == "embedded" and config.num_numeric:
            init = nnx.initializers.normal(1.0 / config.embed_dim**0.5)
            self.numeric_embedding = nnx.Param(
                init(rngs.params(), (config.num_numeric, config.embed_dim), pdt)
            )
        else:
            self.numeric_embedding = None
        self.cross_layers = nnx.List(
            [
                CrossLayer(
                    d0,
                    low_rank=config.low_rank,
                    dtype=dtype,
                    param_dtype=pdt,
                    precision=prec,
                    rngs=rngs,
                )
                for _ in range(config.num_cross_layers)
            ]
        )
        lin = dict(dtype=dtype, param_dtype=pdt, precision=prec, rngs=rngs)
        sizes = (d0, *config.deep_sizes)
        self.deep_layers = nnx.List(
            [
                nnx.Linear(a, b, **lin)
                for a, b in zip(sizes[:-1], sizes[1:], strict=True)
            ]
        )
        if config.structure == "parallel":
            self.cross_head = nnx.Linear(d0, 1, use_bias=False, **lin)
            self.deep_head = nnx.Linear(sizes[-1], 1, use_bias=False, **lin)
            self.bias = nnx.Param(jnp.zeros((), pdt))
        else:
            self.cross_head = None
            self.deep_head = nnx.Linear(sizes[-1], 1, use_bias=True, **lin)
            self.bias = None

    # ------------------------------------------------------------------ pieces

    def _compute_dtype(self, numeric: jax.Array | None):
        if self.config.dtype is not None:
            return jnp.dtype(self.config.dtype)
        dtypes = [leaf.dtype for leaf in jax.tree.leaves(nnx.state(self, nnx.Param))]
        if numeric is not None:
            dtypes.append(numeric.dtype)
        floats = {jnp.dtype(d) for d in dtypes if jnp.issubdtype(d, jnp.floating)}
        if len(floats) == 1:
            return floats.pop()
        # mixed storage/input dtypes: the widest one, as implicit promotion would
        return max(floats, key=lambda d: jnp.finfo(d).bits)

    def embed(self, cat_ids: jax.Array, numeric: jax.Array) -> jax.Array:
        """Master-side embedding: x_0 from raw ids and numeric values.

        Args:
          cat_ids: [B, n_cat] integer ids; ids outside [0, vocab_size) use slot 0.
          numeric: [B, n_num] floats (normalised values).

        Returns:
          x0: [B, d0] in the compute dtype.

        Raises:
          TypeError: if ``cat_ids`` is not integer or ``numeric`` not floating.
          ValueError: if the shapes do not match the configuration.
        """
        cfg = self.config
        name = "DCNv2.embed"
        if not jnp.issubdtype(cat_ids.dtype, jnp.integer):
            raise TypeError(f"{name}: cat_ids must be integer, got {cat_ids.dtype}")
        if not jnp.issubdtype(numeric.dtype, jnp.floating):
            raise TypeError(f"{name}: numeric must be floating, got {numeric.dtype}")
        n_cat = len(cfg.vocab_sizes)
        if cat_ids.ndim != 2 or cat_ids.shape[1] != n_cat:
            raise ValueError(
                f"{name}: cat_ids must be [B, {n_cat}], got shape {cat_ids.shape}"
            )
        if numeric.ndim != 2 or numeric.shape != (cat_ids.shape[0], cfg.num_numeric):
            raise ValueError(
                f"{name}: numeric must be [B, {cfg.num_numeric}] with B = "
                f"{cat_ids.shape[0]}, got shape {numeric.shape}"
            )
        dtype = self._compute_dtype(numeric)
        parts = []
        for j, (emb, size) in enumerate(
            zip(self.embeddings, cfg.vocab_sizes, strict=True)
        ):
            ids = cat_ids[:, j]
            ids = jnp.where((ids >= 0) & (ids < size), ids, jnp.zeros_like(ids))
            parts.append(emb(ids).astype(dtype))
        num = numeric.astype(dtype)
        if self.numeric_embedding is not None:
            vec = self.numeric_embedding[...].astype(dtype)
            parts.append((num[:, :, None] * vec[None, :, :]).reshape(num.shape[0], -1))
        elif cfg.num_numeric:
            parts.append(num)
        return jnp.concatenate(parts, axis=1)

    def cross(self, x0: jax.Array) -> jax.Array:
        """The cross tower: x_L [B, d0], a polynomial of degree L + 1 in x0."""
        x = x0
        for layer in self.cross_layers:
            x = layer(x0, x)
        return x

    def deep(self, x: jax.Array) -> jax.Array:
        """The ReLU MLP: [B, d_in] -> [B, deep_sizes[-1]] (ReLU after every layer)."""
        for layer in self.deep_layers:
            x = jax.nn.relu(layer(x))
        return x

    def _require_parallel(self, method: str):
        if self.config.structure != "parallel":
            raise ValueError(
                f"DCNv2.{method}: only defined for the parallel structure, this model "
                f"is {self.config.structure!r}"
            )

    def cross_logit(self, x0: jax.Array) -> jax.Array:
        """Cross branch with its linear head, no bias: ``w_c . x_L``.

        A polynomial of degree L + 1 in ``x0`` (what coded workers evaluate).

        Args:
          x0: [B, d0].

        Returns:
          [B] in the compute dtype.

        Raises:
          ValueError: for the stacked structure.
        """
        self._require_parallel("cross_logit")
        return self.cross_head(self.cross(x0))[:, 0]

    def deep_logit(self, x0: jax.Array) -> jax.Array:
        """Deep branch with its linear head, no bias: ``w_d . deep(x0)``, [B].

        Raises:
          ValueError: for the stacked structure.
        """
        self._require_parallel("deep_logit")
        return self.deep_head(self.deep(x0))[:, 0]

    def output_bias(self) -> jax.Array:
        """The scalar bias b of the parallel head (in its storage dtype)."""
        self._require_parallel("output_bias")
        return self.bias[...]

    def logits_from_x0(self, x0: jax.Array) -> jax.Array:
        """Logits [B] from x0 [B, d0]."""
        if self.config.structure == "parallel":
            z = self.cross_logit(x0) + self.deep_logit(x0)
            return z + self.bias[...].astype(z.dtype)
        return self.deep_head(self.deep(self.cross(x0)))[:, 0]

    def __call__(self, cat_ids: jax.Array, numeric: jax.Array) -> jax.Array:
        """Logits [B] from ids [B, n_cat] and numeric values [B, n_num]."""
        return self.logits_from_x0(self.embed(cat_ids, numeric))


def cast_floating(model: nnx.Module, dtype) -> nnx.Module:
    """A copy of ``model`` whose floating parameters are cast to ``dtype``.

    With ``config.dtype = None`` the copy then computes in ``dtype`` (given inputs of
    that dtype), e.g. to simulate bfloat16 workers.

    Args:
      model: any ``nnx.Module``.
      dtype: target floating dtype.

    Returns:
      A new module (``model`` is unchanged).
    """
    graphdef, state = nnx.split(model)
    target = jnp.dtype(dtype)
    state = jax.tree.map(
        lambda a: a.astype(target) if jnp.issubdtype(a.dtype, jnp.floating) else a,
        state,
    )
    return nnx.merge(graphdef, state)
