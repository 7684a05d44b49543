"""The GPTQ algorithm of tools/gptq_search.py (Hessian-based error compensation) on random
matrices, against the round-to-nearest rule of tools/hf_quantize.py it shares:
- with a diagonal Hessian (uncorrelated inputs) there is nothing to compensate: the codes,
  zeros and scales equal round-to-nearest's exactly;
- on correlated inputs its output error |X (W - Q)^T|^2 is below round-to-nearest's, with and
  without act-order, symmetric and asymmetric;
- the dequantized matrix it returns is scale * (code - zero) of the returned parameters, and
  the groups partition the inputs (consecutive in act-order's visiting order).
"""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import gptq_search  # noqa: E402
import hf_quantize  # noqa: E402


def rtn(w, groups, sym, min_zero):
    return hf_quantize.quantize_groups(w.astype(np.float32), groups, 4, sym=sym,
                                       min_zero=min_zero)


def dequantize(codes, zeros, scales, groups, in_f):
    gk = np.zeros(in_f, dtype=np.int64)
    for gi, cols in enumerate(groups):
        gk[cols] = gi
    s = scales.astype(np.float64)[gk].T
    return s * (codes.astype(np.float64) - zeros[gk].T)


@pytest.mark.parametrize("sym", [True, False])
def test_diagonal_hessian_is_round_to_nearest(sym):
    rng = np.random.default_rng(1)
    w = rng.standard_normal((24, 128)) * 0.1
    h = np.diag(rng.uniform(0.5, 2.0, 128))
    codes, zeros, scales, groups, _ = gptq_search.gptq_matrix(w, h, 32, 4, sym, 0, False)
    want = rtn(w, groups, sym, 0)
    np.testing.assert_array_equal(codes, want[0])
    np.testing.assert_array_equal(zeros, want[1])
    np.testing.assert_array_equal(scales, want[2])


@pytest.mark.parametrize("sym,desc_act", [(True, False), (False, False), (False, True)])
def test_correlated_inputs_lower_output_error(sym, desc_act):
    rng = np.random.default_rng(2)
    in_f, out_f, n = 128, 32, 512
    mix = rng.standard_normal((in_f, in_f)) * 0.3 + np.eye(in_f)
    x = rng.standard_normal((n, in_f)) @ mix * rng.uniform(0.2, 3.0, in_f)
    w = rng.standard_normal((out_f, in_f)) * 0.1
    h = gptq_search.hessian(x)
    codes, zeros, scales, groups, deq = gptq_search.gptq_matrix(w, h, 32, 4, sym, 0, desc_act)
    assert sorted(np.concatenate(groups).tolist()) == list(range(in_f))
    if desc_act:
        order = np.argsort(-np.diag(h), kind="stable")
        np.testing.assert_array_equal(np.concatenate(groups), order)
    np.testing.assert_array_equal(deq, dequantize(codes, zeros, scales, groups, in_f))
    natural = [np.arange(s, s + 32) for s in range(0, in_f, 32)]
    rc, rz, rs = rtn(w, natural, sym, 0)
    err_gptq = np.sum((x @ (w - deq).T) ** 2)
    err_rtn = np.sum((x @ (w - dequantize(rc, rz, rs, natural, in_f)).T) ** 2)
    assert err_gptq < 0.8 * err_rtn, (err_gptq, err_rtn)
