"""The verdicts of ``theory.verify``: the headline counts and the per-bound summary.

A vacuous (infinite) bound claims nothing: its check has ``holds`` None and is
counted apart from the informative checks.
"""

from __future__ import annotations

from .. import _common as C

_BOUND_NAMES = tuple(b.name for b in C.BOUNDS + C.PER_TRIAL_BOUNDS)


def verdict(checks: list[dict]) -> dict:
    """Counts of informative (finite) checks that hold, and of vacuous bounds.

    A vacuous bound (infinite: it claims nothing) is not a check that held; its
    ``holds`` is None and it is counted apart.
    """
    vacuous = sum(c.get("vacuous") is True for c in checks)
    informative = [c for c in checks if c.get("vacuous") is not True]
    held = sum(c["holds"] is True for c in informative)
    bounds = [c for c in informative if c.get("bound") in _BOUND_NAMES]
    b_held = sum(c["holds"] is True for c in bounds)
    text = (
        f"{held} of {len(informative)} informative checks hold; "
        f"{vacuous} bounds vacuous"
    )
    return {
        "num_informative": len(informative),
        "num_informative_holding": held,
        "num_vacuous": vacuous,
        "num_bound_checks": len(bounds),
        "num_bound_checks_holding": b_held,
        "headline": text,
        "headline_bounds": (
            f"Of these, {b_held} of {len(bounds)} are checks of a bound "
            "against the Monte Carlo or the exhaustive worst case; the rest are "
            "identities and claims"
        ),
    }


def bound_summary(checks: list[dict], blocks: list[dict]) -> list[dict]:
    """Per bound (over every check) and per (bound, points, M, D) of the cond grid.

    Rows: ``{"bound", "label", "points", "M", "D", "informative", "held",
    "vacuous", "applicable", "informative_N", "detectable_rate", "trials"}``; the
    overall row of a bound has ``points`` = M = D = None.
    """
    out = []
    for name in _BOUND_NAMES:
        b = C.BOUND_BY_NAME[name]
        mine = [c for c in checks if c.get("bound") == name]
        if not mine and not blocks:
            continue
        inf = [c for c in mine if c.get("vacuous") is not True]
        out.append(
            {
                "bound": name,
                "label": b.label,
                "kind": b.kind,
                "points": None,
                "M": None,
                "D": None,
                "informative": len(inf),
                "held": sum(c["holds"] is True for c in inf),
                "vacuous": len(mine) - len(inf),
            }
        )
        for blk in blocks:
            p, m, d = blk["points"], blk["M"], blk["D"]
            row = {
                "bound": name,
                "label": b.label,
                "kind": b.kind,
                "points": p,
                "M": m,
                "D": d,
                "applicable": p in b.points,
            }
            if p not in b.points:
                out.append(row)
                continue
            here = [
                c
                for c in mine
                if c.get("points") == p
                and c.get("M") == m
                and c.get("D") == d
                and "s" not in c
            ]
            inf = [c for c in here if c.get("vacuous") is not True]
            rates = [c["detectable_rate"] for c in inf if "detectable_rate" in c]
            row.update(
                informative=len(inf),
                held=sum(c["holds"] is True for c in inf),
                vacuous=len(here) - len(inf),
                informative_N=blk["informative_N"].get(name),
                grid_informative_N=(
                    [min(c["N"] for c in inf), max(c["N"] for c in inf)]
                    if inf
                    else None
                ),
                detectable_rate=max(rates) if rates else None,
                trials=here[0]["trials"] if here else None,
            )
            out.append(row)
    return out
