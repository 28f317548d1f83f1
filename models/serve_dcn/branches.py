"""The served schemes: two codes over the same workers, one per DCNv2 branch.

Worker i receives one Cross input and one Deep input and answers (cross logit, deep
logit); :class:`BranchCode` encodes and decodes both branches from the same mask.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

import codedjax as cj
from codedjax.serving import Adaptive, FirstDecodable, FixedN

from ..coded_dcn import branch_entries
from ..dcn import DCNv2, cast_floating
from .config import ServeDCNConfig

__all__ = ["BranchCode", "make_worker", "schemes"]


@dataclasses.dataclass(frozen=True)
class BranchCode:
    """Two codes over the same workers: worker i gets a Cross and a Deep input.

    ``encode`` stacks the two encodings ([M, 2, d0]); a worker answers (cross logit,
    deep logit) [2]; ``decode`` decodes each branch with its code from the same
    mask and returns value [K, 2]. It follows the ``Code`` interface the server
    needs (a user-written code: the server knows nothing about branches).
    """

    cross: Any
    deep: Any

    @property
    def num_inputs(self) -> int:
        return self.cross.num_inputs

    @property
    def num_workers(self) -> int:
        return self.cross.num_workers

    @property
    def threshold(self) -> int:
        return max(self.cross.threshold, self.deep.threshold)

    @property
    def name(self) -> str:
        return f"{self.cross.name}+{self.deep.name}"

    @property
    def task(self):
        """The replication layout, when both branches are replicated."""
        if getattr(self.cross, "task", None) is None or self.cross != self.deep:
            return None
        return self.cross.task

    def encode(self, x):
        return _branch_encode(self, jnp.asarray(x))

    @property
    def answer_fields(self) -> tuple[str, ...]:
        return ("y", "mask", "order")

    def may_decode(self, mask):
        """Both branches' structural coverage (host side)."""
        return self.cross.may_decode(mask) & self.deep.may_decode(mask)

    def decodable_queries(self, mask) -> np.ndarray:
        """bool [..., K]: the queries both branches give from responders ``mask``
        [..., M] (a query's logit needs its Cross and its Deep logit)."""
        return np.asarray(self.cross.decodable_queries(mask), bool) & np.asarray(
            self.deep.decodable_queries(mask), bool
        )

    @property
    def own_workers(self) -> np.ndarray | None:
        """bool [K, M]: the workers that answer query k as it is in both branches
        (a replica of k for both codes); None unless both codes have some."""
        c = getattr(self.cross, "own_workers", None)
        d = getattr(self.deep, "own_workers", None)
        if c is None or d is None:
            return None
        return np.asarray(c, bool) & np.asarray(d, bool)

    def decodable_from_per_query(self, times) -> np.ndarray:
        """[..., K]: the first moment both branches give query k, from the
        workers' arrival times [..., M] (inf: never)."""
        return np.maximum(
            np.asarray(self.cross.decodable_from_per_query(times), np.float64),
            np.asarray(self.deep.decodable_from_per_query(times), np.float64),
        )

    def decode(self, y, mask, *, order=None):
        m = self.num_workers
        order = jnp.arange(m, dtype=jnp.int32) if order is None else order
        return _branch_decode(
            self, jnp.asarray(y), jnp.asarray(mask), jnp.asarray(order)
        )

    def decode_answers(self, answers: cj.Answers) -> cj.DecodeResult:
        """The runtime's entry point: each branch reads the fields it needs."""
        return self.decode(answers.y, answers.mask, order=answers.order)


@functools.partial(jax.jit, static_argnums=0)
def _branch_encode(code: BranchCode, x):
    return jnp.stack([code.cross.encode(x), code.deep.encode(x)], axis=1)


@functools.partial(jax.jit, static_argnums=0)
def _branch_decode(code: BranchCode, y, mask, order):
    rc = code.cross.decode_answers(cj.Answers(y[:, 0], mask, order))
    rd = code.deep.decode_answers(cj.Answers(y[:, 1], mask, order))
    ok = rc.ok & rd.ok
    return cj.DecodeResult(
        value=jnp.stack([rc.value, rd.value], axis=-1),
        ok=ok,
        cond=jnp.maximum(rc.cond, rd.cond),
        num_used=jnp.maximum(rc.num_used, rd.num_used),
        status=jnp.where(rc.ok, rd.status, rc.status),
        error=jnp.where(ok, rc.error + rd.error, jnp.inf),
    )


def make_worker(model: DCNv2, dtype) -> Any:
    """A worker: row [2, d0] -> (cross logit of row 0, deep logit of row 1) [2], with
    parameters, inputs and arithmetic in ``dtype``."""
    gw, sw = nnx.split(cast_floating(model, dtype))

    def worker(row):
        m = nnx.merge(gw, sw)
        r = row.astype(dtype)
        return jnp.stack([m.cross_logit(r[0:1])[0], m.deep_logit(r[1:2])[0]])

    return worker


#: the served schemes: (Cross entry, Deep entry) of :func:`codedjax.catalogue`, each
#: served as the catalogue says (its ``policy``); ChebyLS + RepApprox also at every
#: N of ``responses`` and under the adaptive policy
PAIRS = (
    ("uncoded", "uncoded"),
    ("replication", "replication"),
    ("threshold", "repapprox"),
)


def _policy(s: cj.Scheme):
    """A catalogue entry's wait policy: its threshold, or the first moment every
    query may decode."""
    return FirstDecodable() if s.policy == "first" else FixedN(s.min_responses)


def schemes(cfg: ServeDCNConfig, budget: float) -> list[tuple[str, Any, Any]]:
    """(name, code, policy) of every scheme; ``budget`` is the adaptive policy's.
    The Cross branch is a polynomial of degree L + 1, the Deep branch is not."""
    cross, deep = branch_entries(
        cfg.train.num_cross_layers + 1,
        cfg.num_inputs,
        cfg.num_workers,
        tuple({p[i] for p in PAIRS + (("chebyls", "repapprox"),)} for i in (0, 1)),
        replicas=cfg.replication,
    )
    out = []
    for c, d in PAIRS:
        code = BranchCode(cross[c].code, deep[d].code)
        out.append((c if c == d else f"{c}+{d}", code, _policy(cross[c])))
    cheb = BranchCode(cross["chebyls"].code, deep["repapprox"].code)
    out += [(f"chebyls+repapprox N={n}", cheb, FixedN(n)) for n in cfg.responses]
    out.append(("adaptive", cheb, Adaptive(budget, cfg.deadline)))
    return out
