"""A small RepVGG for 28x28 MNIST digits, in Flax NNX, with its structural
re-parameterisation.

Training-time network (``deploy=False``): stages of RepVGG blocks, then global average
pooling and a linear head. A block maps x to

.. math::

    \\mathrm{ReLU}\\bigl(\\mathrm{BN}_3(W_3 * x) + \\mathrm{BN}_1(W_1 * x)
    + \\mathrm{BN}_0(x)\\bigr),

a 3x3 convolution (padding 1), a 1x1 convolution and an identity branch, each followed
by its own batch norm; the identity branch exists only where the block keeps the shape
(stride 1 and as many input as output channels). The first block of a stage has the
stage's stride, the others stride 1. All convolutions are bias-free.

Inference-time network (``deploy=True``): every block is one 3x3 convolution with bias
and a ReLU. :func:`reparameterize` turns a trained network into it, as in Ding et al.:
in evaluation mode a batch norm is the affine map
:math:`\\mathrm{BN}(y) = t\\,(y - \\mu) + \\beta` with
:math:`t = \\gamma / \\sqrt{\\sigma^2 + \\epsilon}` per output channel, so each
branch is a convolution with kernel :math:`t W` and bias :math:`\\beta - t\\mu`. The
1x1 kernel is zero-padded to 3x3 (its tap goes to the centre, where the 3x3
convolution with padding 1 and the 1x1 one without padding read the same pixel, at
any stride), and the identity is the 3x3 kernel with a 1 at the centre of each
channel's own tap. The three kernels and biases add up to one 3x3 convolution. The
fused network equals the multi-branch network in evaluation mode up to rounding; it is
what the coded workers run.

Stages: the paper's five stride-2 stages, adapted to 28x28 inputs and two CPU cores:
by default widths 16, 32, 64, blocks 1, 2, 2, strides 1, 2, 2 (28 -> 28 -> 14 -> 7).

Built in evaluation mode (running statistics: a per-image function); training calls
``model.train()`` (batch statistics, running averages with momentum 0.9) and
``model.eval()`` after, as :mod:`models.train_mnist` does. Fusing is done once:
:func:`reparameterize` of a fused network raises ``ValueError``. The two forms have
different variables (``conv3``, ``bn3``, ``conv1``, ``bn1``, ``bn_id``; ``conv``):
:meth:`RepVGG.check_checkpoint_variables`, called first by
:func:`models.checkpoint.load_checkpoint`, refuses a file of the other form.

References:
    Ding, X., Zhang, X., Ma, N., Han, J., Ding, G. & Sun, J. (2021), RepVGG: Making
    VGG-style ConvNets great again, CVPR 2021, arXiv:2101.03697.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

__all__ = ["RepVGG", "checkpoint_form", "fuse_block", "reparameterize"]

BN_MOMENTUM = 0.9
BN_EPSILON = 1e-5
_PAD3 = ((1, 1), (1, 1))

# Variable names that tell the two forms apart (a path component of every block's
# variables); see RepVGG.check_checkpoint_variables.
_MULTI_BRANCH_NAMES = frozenset({"conv3", "bn3", "conv1", "bn1", "bn_id"})
_FUSED_NAMES = frozenset({"conv"})


def _bn(num_features: int, rngs: nnx.Rngs, param_dtype) -> nnx.BatchNorm:
    bn = nnx.BatchNorm(
        num_features,
        use_running_average=True,
        momentum=BN_MOMENTUM,
        epsilon=BN_EPSILON,
        param_dtype=param_dtype,
        rngs=rngs,
    )
    # flax keeps running statistics in float32 whatever param_dtype is; a float64
    # network needs them in float64 too (its normalisation runs in their dtype)
    bn.mean.set_value(jnp.zeros((num_features,), param_dtype))
    bn.var.set_value(jnp.ones((num_features,), param_dtype))
    return bn


def _conv(size, cin, cout, stride, rngs, param_dtype, *, bias) -> nnx.Conv:
    """A size x size convolution: padding 1 for 3x3 (flax's "SAME" pads
    asymmetrically at stride 2, which the fused kernel would not reproduce), none
    for 1x1."""
    return nnx.Conv(
        cin,
        cout,
        (size, size),
        strides=stride,
        padding=_PAD3 if size == 3 else "VALID",
        use_bias=bias,
        param_dtype=param_dtype,
        rngs=rngs,
    )


class RepVGGBlock(nnx.Module):
    """The training-time block: 3x3 conv + BN, 1x1 conv + BN, identity BN, summed,
    then ReLU (the identity branch only when ``stride == 1`` and
    ``in_features == out_features``)."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        stride: int,
        *,
        rngs: nnx.Rngs,
        param_dtype=jnp.float32,
    ):
        self.in_features = in_features
        self.out_features = out_features
        self.stride = stride
        conv = (in_features, out_features, stride, rngs, param_dtype)
        self.conv3 = _conv(3, *conv, bias=False)
        self.bn3 = _bn(out_features, rngs, param_dtype)
        self.conv1 = _conv(1, *conv, bias=False)
        self.bn1 = _bn(out_features, rngs, param_dtype)
        has_identity = stride == 1 and in_features == out_features
        self.bn_id = _bn(in_features, rngs, param_dtype) if has_identity else None

    def __call__(self, x: jax.Array) -> jax.Array:
        y = self.bn3(self.conv3(x)) + self.bn1(self.conv1(x))
        if self.bn_id is not None:
            y = y + self.bn_id(x)
        return jax.nn.relu(y)


class FusedBlock(nnx.Module):
    """The inference-time block: one 3x3 convolution with bias (padding 1), then
    ReLU."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        stride: int,
        *,
        rngs: nnx.Rngs,
        param_dtype=jnp.float32,
    ):
        self.in_features = in_features
        self.out_features = out_features
        self.stride = stride
        self.conv = _conv(
            3, in_features, out_features, stride, rngs, param_dtype, bias=True
        )

    def __call__(self, x: jax.Array) -> jax.Array:
        return jax.nn.relu(self.conv(x))


def _int_tuple(name: str, value, *, minimum: int) -> tuple[int, ...]:
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        raise TypeError(f"RepVGG: {name} must be a sequence of ints, got {value!r}")
    try:
        items = tuple(value)
    except TypeError:
        raise TypeError(
            f"RepVGG: {name} must be a sequence of ints, got {value!r}"
        ) from None
    for v in items:
        if isinstance(v, bool) or not isinstance(v, int | np.integer):
            raise TypeError(f"RepVGG: {name} must hold ints, got {items!r}")
        if v < minimum:
            raise ValueError(
                f"RepVGG: every entry of {name} must be >= {minimum}, got {items!r}"
            )
    return tuple(int(v) for v in items)


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"RepVGG: {name} must be an int, got {value!r}")
    if value < 1:
        raise ValueError(f"RepVGG: {name} must be >= 1, got {value}")
    return int(value)


class RepVGG(nnx.Module):
    """RepVGG for [B, H, H, C] images (28x28x1 digits by default).

    Args:
        rngs: ``nnx.Rngs`` for the parameter initialisation.
        widths: output channels of each stage.
        depths: blocks in each stage (as many entries as ``widths``).
        strides: stride of each stage's first block (as many entries as ``widths``);
            the image side must be divisible by each stride in turn.
        num_classes: output logits.
        image_size: side H of the square input images.
        in_channels: channels C of the input images.
        deploy: build the fused inference-time network (one 3x3 convolution with
            bias per block) instead of the multi-branch training-time one. Normally
            made by :func:`reparameterize`; ``deploy=True`` here builds the skeleton a
            fused checkpoint loads into.
        param_dtype: dtype of the parameters and batch statistics.

    Call:
        ``model(x)`` with x [B, image_size, image_size, in_channels] float returns
        logits [B, num_classes] in x's float dtype promoted with ``param_dtype``.
        The network is built in evaluation mode; ``model.train()`` switches its batch
        norms to batch statistics (and updates their running averages).

    Raises:
        ValueError: when a width, depth, stride, ``num_classes``, ``image_size`` or
            ``in_channels`` is below 1, ``widths``/``depths``/``strides`` are empty or
            of different lengths, a stride does not divide the image side it is
            applied to, or (at call time) x has the wrong shape.
        TypeError: when a size is not an int (or a sequence of ints).

    Examples:
        >>> from flax import nnx
        >>> import jax.numpy as jnp
        >>> model = RepVGG(rngs=nnx.Rngs(0), widths=(8, 16), depths=(1, 2))
        >>> model(jnp.zeros((2, 28, 28, 1))).shape
        (2, 10)
        >>> fused = reparameterize(model)
        >>> fused.deploy, bool(jnp.allclose(fused(jnp.ones((1, 28, 28, 1))),
        ...                                 model(jnp.ones((1, 28, 28, 1))), atol=1e-5))
        (True, True)
    """

    def __init__(
        self,
        *,
        rngs: nnx.Rngs,
        widths: Sequence[int] = (16, 32, 64),
        depths: Sequence[int] = (1, 2, 2),
        strides: Sequence[int] | None = None,
        num_classes: int = 10,
        image_size: int = 28,
        in_channels: int = 1,
        deploy: bool = False,
        param_dtype=jnp.float32,
    ):
        widths = _int_tuple("widths", widths, minimum=1)
        depths = _int_tuple("depths", depths, minimum=1)
        if strides is None:
            strides = (1,) + (2,) * (len(widths) - 1)
        strides = _int_tuple("strides", strides, minimum=1)
        if not widths:
            raise ValueError("RepVGG: widths must have at least one stage, got ()")
        if not len(widths) == len(depths) == len(strides):
            raise ValueError(
                "RepVGG: widths, depths and strides must have one entry per stage, "
                f"got widths={widths}, depths={depths}, strides={strides}"
            )
        num_classes = _positive_int("num_classes", num_classes)
        image_size = _positive_int("image_size", image_size)
        in_channels = _positive_int("in_channels", in_channels)
        side = image_size
        for stage, stride in enumerate(strides):
            if side % stride:
                raise ValueError(
                    f"RepVGG: the strides {strides} do not divide image_size "
                    f"{image_size}: stage {stage} gets {side}x{side} pixels and "
                    f"stride {stride}"
                )
            side //= stride
        self.widths = widths
        self.depths = depths
        self.strides = strides
        self.num_classes = num_classes
        self.image_size = image_size
        self.in_channels = in_channels
        self.deploy = bool(deploy)
        self.param_dtype = param_dtype
        self.output_side = side

        block_cls = FusedBlock if self.deploy else RepVGGBlock
        blocks = []
        cin = in_channels
        for width, depth, stride in zip(widths, depths, strides, strict=True):
            for i in range(depth):
                blocks.append(
                    block_cls(
                        cin,
                        width,
                        stride if i == 0 else 1,
                        rngs=rngs,
                        param_dtype=param_dtype,
                    )
                )
                cin = width
        self.blocks = nnx.List(blocks)
        self.head = nnx.Linear(
            widths[-1], num_classes, param_dtype=param_dtype, rngs=rngs
        )

    def config(self) -> dict:
        """The constructor's settings (without ``rngs`` and ``param_dtype``)."""
        return {
            "widths": self.widths,
            "depths": self.depths,
            "strides": self.strides,
            "num_classes": self.num_classes,
            "image_size": self.image_size,
            "in_channels": self.in_channels,
            "deploy": self.deploy,
        }

    def __call__(self, x: jax.Array) -> jax.Array:
        want = (self.image_size, self.image_size, self.in_channels)
        if x.ndim != 4 or tuple(x.shape[1:]) != want:
            raise ValueError(
                f"RepVGG: x must have shape [B, {want[0]}, {want[1]}, {want[2]}], "
                f"got {tuple(x.shape)}"
            )
        for block in self.blocks:
            x = block(x)
        return self.head(jnp.mean(x, axis=(1, 2)))

    def check_checkpoint_variables(self, names: Iterable[str]) -> None:
        """Refuse a checkpoint of the other form with a clear error.

        Args:
            names: the variable paths a checkpoint holds, ``/``-separated
                (``"blocks/0/conv3/kernel"``), as the project's checkpoint format
                stores them.

        Raises:
            ValueError: when the names are those of the multi-branch network and this
                model is fused, or the reverse. Names of neither form pass (the
                loader's own variable-by-variable check reports those).
        """
        form = checkpoint_form(names)
        mine = "fused" if self.deploy else "multi-branch"
        if form is None or form == mine:
            return
        if form == "multi-branch":
            raise ValueError(
                "RepVGG: the checkpoint holds the multi-branch (training-time) "
                "network but the model is the fused (deploy) network; load it into "
                "RepVGG(..., deploy=False) and fuse that with reparameterize()"
            )
        raise ValueError(
            "RepVGG: the checkpoint holds the fused (deploy) network but the model "
            "is the multi-branch (training-time) network; load it into "
            "RepVGG(..., deploy=True)"
        )


def checkpoint_form(names: Iterable[str]) -> str | None:
    """``"multi-branch"``, ``"fused"`` or None: which RepVGG form a set of variable
    paths (``"blocks/0/conv3/kernel"``, ...) belongs to."""
    parts = [str(n).split("/") for n in names]
    blocks = [p[2] for p in parts if len(p) > 2 and p[0] == "blocks"]
    if not blocks:
        return None
    if any(b in _MULTI_BRANCH_NAMES for b in blocks):
        return "multi-branch"
    if all(b in _FUSED_NAMES for b in blocks):
        return "fused"
    return None


def _bn_affine(bn: nnx.BatchNorm) -> tuple[np.ndarray, np.ndarray]:
    """(t, s) in float64 with BN(y) = t * y + s in evaluation mode."""
    mean = np.asarray(bn.mean[...], dtype=np.float64)
    var = np.asarray(bn.var[...], dtype=np.float64)
    scale = np.asarray(bn.scale[...], dtype=np.float64)
    bias = np.asarray(bn.bias[...], dtype=np.float64)
    t = scale / np.sqrt(var + bn.epsilon)
    return t, bias - t * mean


def fuse_block(block: RepVGGBlock) -> tuple[np.ndarray, np.ndarray]:
    """The 3x3 kernel and bias of the convolution that equals ``block``'s three
    branches in evaluation mode (before the ReLU), computed in float64 on the host.

    .. math::

        K = t_3 W_3 + \\mathrm{pad}(t_1 W_1) + t_0 I, \\qquad
        b = (\\beta_3 - t_3\\mu_3) + (\\beta_1 - t_1\\mu_1) + (\\beta_0 - t_0\\mu_0)

    with :math:`t = \\gamma/\\sqrt{\\sigma^2+\\epsilon}` of each branch's batch norm
    (the identity terms only when the block has the identity branch).

    Args:
        block: a :class:`RepVGGBlock`.

    Returns:
        ``(kernel, bias)``: float64 numpy arrays [3, 3, C_in, C_out] (flax's
        ``nnx.Conv`` layout: a cross-correlation with padding 1) and [C_out].

    Raises:
        TypeError: when ``block`` is not a :class:`RepVGGBlock`.
    """
    if not isinstance(block, RepVGGBlock):
        raise TypeError(
            f"fuse_block: block must be a RepVGGBlock, got {type(block).__name__}"
        )
    t3, s3 = _bn_affine(block.bn3)
    t1, s1 = _bn_affine(block.bn1)
    kernel = np.asarray(block.conv3.kernel[...], dtype=np.float64) * t3
    kernel[1, 1] += np.asarray(block.conv1.kernel[...], dtype=np.float64)[0, 0] * t1
    bias = s3 + s1
    if block.bn_id is not None:
        t0, s0 = _bn_affine(block.bn_id)
        idx = np.arange(block.in_features)
        kernel[1, 1, idx, idx] += t0
        bias = bias + s0
    return kernel, bias


def reparameterize(model: RepVGG) -> RepVGG:
    """The fused (deploy) network of a multi-branch :class:`RepVGG`.

    Every block becomes one 3x3 convolution with bias (:func:`fuse_block`, computed in
    float64 and rounded once to the model's parameter dtype); the head is copied. The
    result equals ``model`` in evaluation mode up to rounding, whatever mode ``model``
    is in (the running statistics are folded, never batch statistics). ``model`` is
    not changed.

    Args:
        model: a multi-branch :class:`RepVGG` (``deploy=False``).

    Returns:
        A new :class:`RepVGG` with ``deploy=True`` and the same configuration.

    Raises:
        TypeError: when ``model`` is not a :class:`RepVGG`.
        ValueError: when ``model`` is already fused (fusing is done once; a fused
            network has no batch norms left to fold).
    """
    if not isinstance(model, RepVGG):
        raise TypeError(
            f"reparameterize: model must be a RepVGG, got {type(model).__name__}"
        )
    if model.deploy:
        raise ValueError(
            "reparameterize: the model is already fused (deploy=True); fusing is "
            "done once, on the multi-branch network"
        )
    cfg = model.config()
    cfg["deploy"] = True
    # the skeleton's shapes only (no initialiser runs); every variable is set below
    fused = nnx.eval_shape(
        lambda: RepVGG(rngs=nnx.Rngs(0), param_dtype=model.param_dtype, **cfg)
    )
    for src, dst in zip(model.blocks, fused.blocks, strict=True):
        kernel, bias = fuse_block(src)
        dtype = np.dtype(src.conv3.kernel[...].dtype)
        dst.conv.kernel.set_value(jnp.asarray(kernel.astype(dtype)))
        dst.conv.bias.set_value(jnp.asarray(bias.astype(dtype)))
    fused.head.kernel.set_value(model.head.kernel[...])
    fused.head.bias.set_value(model.head.bias[...])
    return fused
