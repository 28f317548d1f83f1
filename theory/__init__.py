"""Theory checks and demos for codedjax, run from the checkout with ``python -m``.

- ``python -m theory.verify [--quick] --out DIR``: the condition-number and RepApprox
  recovery bounds of :mod:`codedjax.bounds` against sharded Monte Carlo.
- ``python -m theory.demo --out DIR``: ChebyLS against the threshold decoder.
- ``python -m theory.collect --out DIR``: one report from the parts of ``make run``.

This package uses only the public names of :mod:`codedjax`.
"""
