"""LeNet5 for 28x28 MNIST digits, in Flax NNX.

conv 5x5 (6, padded to keep 28x28) -> ReLU -> max-pool 2 -> conv 5x5 (16, valid) -> ReLU
-> max-pool 2 -> flatten 400 -> 120 -> ReLU -> 84 -> ReLU -> 10 logits.

This is the common modern reading of LeCun et al. (1998): ReLU and max pooling instead
of the original scaled tanh, sub-sampling layers and RBF output; the 28x28 input is
padded by 2 in the first convolution, as the original padded MNIST to 32x32.

References:
    LeCun, Y., Bottou, L., Bengio, Y. & Haffner, P. (1998), Gradient-based learning
    applied to document recognition, Proc. IEEE 86(11), 2278-2324.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

__all__ = ["LeNet5"]


class LeNet5(nnx.Module):
    """LeNet5: two 5x5 convolutions with pooling, then 120 -> 84 -> ``num_classes``.

    Args:
        rngs: ``nnx.Rngs`` for the parameter initialisation.
        num_classes: output logits (10 for MNIST).

    Call:
        ``model(x)`` with x [B, 28, 28, 1] float (pixels in [0, 1]) returns logits
        [B, num_classes] in x's float dtype promoted with float32.

    Raises:
        ValueError: when x does not have shape [B, 28, 28, 1].
    """

    def __init__(self, *, rngs: nnx.Rngs, num_classes: int = 10):
        self.conv1 = nnx.Conv(1, 6, kernel_size=(5, 5), padding="SAME", rngs=rngs)
        self.conv2 = nnx.Conv(6, 16, kernel_size=(5, 5), padding="VALID", rngs=rngs)
        self.fc1 = nnx.Linear(16 * 5 * 5, 120, rngs=rngs)
        self.fc2 = nnx.Linear(120, 84, rngs=rngs)
        self.fc3 = nnx.Linear(84, num_classes, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        if x.ndim != 4 or tuple(x.shape[1:]) != (28, 28, 1):
            raise ValueError(
                f"LeNet5: x must have shape [B, 28, 28, 1], got {tuple(x.shape)}"
            )
        x = nnx.max_pool(jax.nn.relu(self.conv1(x)), (2, 2), strides=(2, 2))
        x = nnx.max_pool(jax.nn.relu(self.conv2(x)), (2, 2), strides=(2, 2))
        x = jnp.reshape(x, (x.shape[0], -1))
        x = jax.nn.relu(self.fc1(x))
        x = jax.nn.relu(self.fc2(x))
        return self.fc3(x)
