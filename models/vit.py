"""A small Vision Transformer for 28x28 MNIST digits, in Flax NNX.

Non-overlapping p x p patches (p = 7 gives 16 tokens, p = 4 gives 49) are flattened and
projected to ``width``; a learned class token and learned position embeddings are
added; ``depth`` pre-LayerNorm encoder blocks (multi-head self-attention, then a GELU
MLP of ``mlp_ratio * width``, both residual) follow; the final LayerNorm of the class
token goes through a linear head to the logits. No dropout: the model is small.

References:
    Dosovitskiy, A. et al. (2021), An image is worth 16x16 words: Transformers for image
    recognition at scale, ICLR 2021, arXiv:2010.11929.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

__all__ = ["SmallViT", "patchify"]


def patchify(x: jax.Array, patch: int) -> jax.Array:
    """[B, H, W, C] -> [B, (H/p)(W/p), p*p*C], patches in row-major order."""
    b, h, w, c = x.shape
    x = jnp.reshape(x, (b, h // patch, patch, w // patch, patch, c))
    x = jnp.transpose(x, (0, 1, 3, 2, 4, 5))
    return jnp.reshape(x, (b, (h // patch) * (w // patch), patch * patch * c))


class _Block(nnx.Module):
    def __init__(self, width: int, heads: int, mlp_ratio: int, *, rngs: nnx.Rngs):
        self.ln1 = nnx.LayerNorm(width, rngs=rngs)
        self.attn = nnx.MultiHeadAttention(
            num_heads=heads, in_features=width, decode=False, rngs=rngs
        )
        self.ln2 = nnx.LayerNorm(width, rngs=rngs)
        self.mlp1 = nnx.Linear(width, mlp_ratio * width, rngs=rngs)
        self.mlp2 = nnx.Linear(mlp_ratio * width, width, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp2(jax.nn.gelu(self.mlp1(self.ln2(x))))


class SmallViT(nnx.Module):
    """Vision Transformer for [B, 28, 28, 1] digits.

    Args:
        rngs: ``nnx.Rngs`` for the parameter initialisation.
        patch: patch side p; must divide 28 (4 or 7).
        width: token width.
        depth: number of encoder blocks.
        heads: attention heads (must divide ``width``).
        mlp_ratio: MLP hidden width / ``width``.
        num_classes: output logits.

    Call:
        ``model(x)`` with x [B, 28, 28, 1] returns logits [B, num_classes].

    Raises:
        ValueError: when ``patch`` does not divide 28, ``heads`` does not divide
            ``width``, or (at call time) x does not have shape [B, 28, 28, 1].
    """

    def __init__(
        self,
        *,
        rngs: nnx.Rngs,
        patch: int = 7,
        width: int = 64,
        depth: int = 3,
        heads: int = 4,
        mlp_ratio: int = 2,
        num_classes: int = 10,
    ):
        if patch < 1 or 28 % patch:
            raise ValueError(f"SmallViT: patch must divide 28, got {patch}")
        if heads < 1 or width % heads:
            raise ValueError(
                f"SmallViT: heads must divide width, got heads={heads}, width={width}"
            )
        self.patch = patch
        num_tokens = (28 // patch) ** 2
        self.embed = nnx.Linear(patch * patch, width, rngs=rngs)
        init = nnx.initializers.normal(0.02)
        self.cls = nnx.Param(init(rngs.params(), (1, 1, width)))
        self.pos = nnx.Param(init(rngs.params(), (1, num_tokens + 1, width)))
        self.blocks = nnx.List(
            [_Block(width, heads, mlp_ratio, rngs=rngs) for _ in range(depth)]
        )
        self.ln = nnx.LayerNorm(width, rngs=rngs)
        self.head = nnx.Linear(width, num_classes, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        if x.ndim != 4 or tuple(x.shape[1:]) != (28, 28, 1):
            raise ValueError(
                f"SmallViT: x must have shape [B, 28, 28, 1], got {tuple(x.shape)}"
            )
        tokens = self.embed(patchify(x, self.patch))
        cls = jnp.broadcast_to(self.cls[...], (x.shape[0], 1, tokens.shape[-1]))
        h = jnp.concatenate([cls.astype(tokens.dtype), tokens], axis=1) + self.pos[...]
        for block in self.blocks:
            h = block(h)
        return self.head(self.ln(h[:, 0]))
