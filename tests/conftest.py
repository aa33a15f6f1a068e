"""Shared test settings."""

import pytest
import torch
from threadpoolctl import threadpool_limits


@pytest.fixture(autouse=True, scope="session")
def one_thread():
    """The test models are tiny: one torch/BLAS thread is faster than two, and on a shared
    2-core machine two intra-op threads competing with other processes run many times slower.
    End-to-end tests run Snakemake in subprocesses, which set their own thread counts."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    with threadpool_limits(1):
        yield
    torch.set_num_threads(before)
