"""The extension's own test, as its author would write it: build it, call it on a
layer-shaped problem, compare with PyTorch. KWB_DEFECT in the environment plants a
defect (see linear_ext.cu). The test also checks that the call leaves its inputs as
they were, which `kwb diagnose -- python -m pytest ...` must keep true while it runs
the launch on its own inputs."""

import os
import pathlib

import pytest
import torch
from torch.utils.cpp_extension import load

HERE = pathlib.Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def ext():
    defect = os.environ.get("KWB_DEFECT", "none")
    return load(
        name=f"linear_ext_{defect}",
        sources=[str(HERE / "linear_ext.cu")],
        extra_cuda_cflags=["-O3", f"-DKWB_DEFECT={defect}"],
        verbose=False,
    )


@pytest.mark.parametrize("m,n,k", [(256, 384, 512)])
def test_linear_matches_torch(ext, m, n, k):
    torch.manual_seed(0)
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    x_before, w_before = x.clone(), w.clone()
    out = ext.linear(x, w)
    torch.cuda.synchronize()
    assert torch.equal(x, x_before) and torch.equal(w, w_before), "the call changed its inputs"
    want = (x.float() @ w.float().T).to(torch.bfloat16)
    torch.testing.assert_close(out.float(), want.float(), rtol=2e-2, atol=2e-1)
