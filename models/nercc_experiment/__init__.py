"""NeRCC's experiment on MNIST: BACC against NeRCC against RepApprox, on LeNet5,
RepVGG and a ViT (the three models of the NeRCC paper).

Usage::

    python -m models.nercc_experiment --quick --out results/nercc   # ~7 min, 2 CPUs
    python -m models.nercc_experiment --out results/nercc           # the full grid

For every model and every cell (K queries, M workers, S stragglers) of the grid, each
scheme's :class:`codedjax.Code` encodes batches of K query images into M coded images,
every worker runs the model on its coded image, S random workers are dropped (T
uniform straggler patterns per cell, shared by every batch, scheme and model), and
the responders' logits are decoded back into K logit vectors. Reported per scheme:

- ``mse``: mean over batches, masks, queries and the 10 logits of (decoded logit -
  uncoded logit)^2, and ``nmse`` = mse / mean(uncoded logit^2), comparable across
  models;
- ``rel_acc``: accuracy of the argmax of the decoded logits on the true labels, divided
  by the uncoded model's accuracy on the same images (LeTCC's and NeRCC's RelAcc);
- conservative standard errors (``mse_se``, ``rel_acc_se``): the standard errors
  over image batches and over masks added in quadrature (for RelAcc, of the change
  coded minus uncoded accuracy), and for NeRCC the smoothing pair chosen on the
  VALIDATION images (with its validation MSE, and that of (0, 0)).

Models (``--models``, default LeNet5, RepVGG and the ViT of the registry
:data:`models.train_mnist.MODELS`), trained (or loaded) by :mod:`models.train_mnist`;
a model's coded workers run its deployed network, for RepVGG the fused one (one 3x3
convolution per block, :func:`models.repvgg.reparameterize`). The paper evaluates
LeNet5 on MNIST, RepVGG on CIFAR-10 and ViT on CIFAR-100, as we read it (not
verified here); the bundled MNIST subset stands in for all three here, since no other
image data set can be shipped.

Schemes (data points beta: K first-kind Chebyshev points; worker points alpha: M
second-kind points, for BACC and NeRCC alike):

- ``bacc``: Berrut encoder and decoder (Jahani-Nezhad & Maddah-Ali).
- ``nercc``: smoothing-spline encoder and decoder; (lambda_e, lambda_d) are tuned
  jointly for each cell by :func:`codedjax.tune_nercc` on the validation split, under
  the cell's straggler model (uniform N = M - S of M), never on test images.
- ``repapprox``: replication c (``--replication``, default 2) plus M - Kc coded
  servers, where M >= Kc, with the library's default layout and unified Berrut
  decoder (every query with a responding replica is exact).

Layer-wise coding (``--layerwise``, ``layerwise``: :class:`LayerwiseConfig`,
:func:`run_layerwise`): ParM's MLP 784-200-100-10 served one linear layer per round
of a degree-1 ChebyLS code (``models.layerwise``), against one-shot BACC, NeRCC and
RepApprox on the whole MLP and replication at equal workers, latency on the
simulator (the regime map's four straggler models) and top-1 with bf16 workers.

Modules: ``config`` (:class:`ExperimentConfig`, :class:`LayerwiseConfig`),
``layerwise``, ``pipeline`` (:func:`run_cell`,
:func:`run_experiment`), ``metrics`` (MSE, RelAcc, :func:`compare_schemes`),
``report`` (tables, plots, ``report.md``) and ``__main__``.
Checkpoints in ``--ckpt-dir`` are reused.

References:
    P. Moradi and M. A. Maddah-Ali, NeRCC: nested-regression coded computing for
    resilient distributed prediction serving systems, arXiv:2402.04377 (its Table 1:
    RMSE and RelAcc of NeRCC and BACC on LeNet5, RepVGG and ViT);
    T. Jahani-Nezhad and M. A. Maddah-Ali, Berrut approximated coded computing,
    arXiv:2009.08327.
"""

from .config import SCHEMES as SCHEMES
from .config import ExperimentConfig as ExperimentConfig
from .config import LayerwiseConfig as LayerwiseConfig
from .config import straggler_counts as straggler_counts
from .layerwise import format_layerwise as format_layerwise
from .layerwise import run_layerwise as run_layerwise
from .metrics import compare_schemes as compare_schemes
from .pipeline import NerccSummary as NerccSummary
from .pipeline import cell_codes as cell_codes
from .pipeline import cell_key as cell_key
from .pipeline import run_cell as run_cell
from .pipeline import run_experiment as run_experiment
