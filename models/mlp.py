"""ParM's MNIST base model: a 784-200-100-10 ReLU multilayer perceptron, in Flax NNX.

flatten 784 -> 200 -> ReLU -> 100 -> ReLU -> 10 logits: the "base-mlp" of the
parity-models paper (Kosaian, Rashmi and Venkataraman, SOSP 2019), beside LeNet5 in
the MNIST registry (``python -m models.train_mnist --model mlp``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

__all__ = ["MLP"]


class MLP(nnx.Module):
    """784 -> 200 -> 100 -> ``num_classes`` with ReLU between the layers.

    Args:
        rngs: ``nnx.Rngs`` for the parameter initialisation.
        num_classes: output logits (10 for MNIST).

    Call:
        ``model(x)`` with x [B, 28, 28, 1] float returns logits [B, num_classes].

    Raises:
        ValueError: when x does not have shape [B, 28, 28, 1].
    """

    def __init__(self, *, rngs: nnx.Rngs, num_classes: int = 10):
        self.fc1 = nnx.Linear(28 * 28, 200, rngs=rngs)
        self.fc2 = nnx.Linear(200, 100, rngs=rngs)
        self.fc3 = nnx.Linear(100, num_classes, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        if x.ndim != 4 or tuple(x.shape[1:]) != (28, 28, 1):
            raise ValueError(f"MLP: x must have shape [B, 28, 28, 1], got {x.shape}")
        x = jnp.reshape(x, (x.shape[0], -1))
        x = jax.nn.relu(self.fc1(x))
        x = jax.nn.relu(self.fc2(x))
        return self.fc3(x)
