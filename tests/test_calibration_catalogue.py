"""theory.calibration --codes: its codes are the catalogue's entries.

Every scheme of ``codedjax.catalogue`` that serves a request in one round is
calibrated (layer-wise coding is the one that does not), the circle code as its
four (packing, decoder) variants, ParM with group size 2; a code the catalogue
does not apply on a setting is skipped there, and the approximate decodes are the
catalogue's inexact schemes (and the graceful decoder below D).
"""

import pytest

import codedjax as cj
from theory import calibration as tc


def test_codes_are_the_catalogue_names_with_the_circle_variants():
    bases = {"circle" if n in tc.CIRCLE_VARIANTS else n for n in tc.CODES}
    assert bases == set(cj.SCHEME_NAMES) - {"layerwise"}
    assert len(tc.CODES) == len(set(tc.CODES)) == len(cj.SCHEME_NAMES) + 2


@pytest.mark.parametrize("setting", list(tc.SETTINGS))
def test_each_code_is_the_catalogue_entry(setting):
    k, m, d = tc.SETTINGS[setting]
    wl = cj.Workload(setting, d, linear=d == 1)
    for name in tc.CODES:
        s = tc.catalogue_scheme(name, setting, "bfloat16")
        if name in tc.CIRCLE_VARIANTS:
            pack, decoder = tc.CIRCLE_VARIANTS[name]
            if pack and d != 1:  # packing needs a linear workload
                assert s is None
                continue
            assert s.code.pack == pack
            assert s.policy == ("threshold" if decoder == "threshold" else "fixed")
            continue
        if name in ("random", "parity") and d != 1:  # exact only when linear
            assert s is None, name
            continue
        (want,) = [
            e
            for e in cj.catalogue(wl, k, m, worker_dtype="bfloat16", names=[name])
            if e.name == name or e.name == "parity k=2"
        ]
        assert s.name == want.name and s.code == want.code, name
        assert tc.catalogue_code(name, setting, "bfloat16") == want.code
        n = want.code.num_workers
        assert tc.approximate_at(s, n, d) == (not want.exact), name
    graceful = tc.catalogue_scheme("graceful", setting, "bfloat16")
    assert tc.approximate_at(graceful, (k - 1) * d, d)  # below D
    with pytest.raises(ValueError, match="catalogue_scheme: name must be one of"):
        tc.catalogue_scheme("turbo", setting, "bfloat16")
