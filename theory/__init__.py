"""Theory checks and demos for codedjax, run from the checkout with ``python -m``.

- ``python -m theory.verify [--quick] --out DIR``: the condition-number and RepApprox
  recovery bounds of :mod:`codedjax.bounds` against sharded Monte Carlo.
- ``python -m theory.plan --workers M --inputs K --degree d ...``: choose N, the
  fewest responses that meet an error target with a failure budget.
- ``python -m theory.beyond``: candidate bounds for N >= M/2 against Monte Carlo.
- ``python -m theory.demo --out DIR``: ChebyLS against the threshold decoder.
- ``python -m theory.collect --out DIR``: one report from the parts of ``make run``.

``verify`` and ``plan`` are packages: ``config`` (a frozen dataclass with ``quick()``),
``pipeline`` (returns a typed summary), ``report`` (and ``plots``), ``__main__``.
This package uses only the public names of :mod:`codedjax`.
"""
