"""Shared test settings."""

import sys
from pathlib import Path

import pytest
import torch
from threadpoolctl import threadpool_limits

# the fake inputs of scripts/ci/fake_inputs.py (random weights, preset data layouts)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts" / "ci"))


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


@pytest.fixture(scope="session")
def _random_timm_weights(tmp_path_factory):
    """model name -> a file holding a randomly initialised timm state dict of that model."""
    cache = {}

    def get(model: str):
        if model not in cache:
            from fake_inputs import random_timm

            path = tmp_path_factory.mktemp("weights") / f"{model}.pth"
            random_timm(model, path)
            cache[model] = path
        return cache[model]

    return get


@pytest.fixture
def place_pretrained(_random_timm_weights):
    """``place(cfg, workdir)``: put a random-weight state dict of the right architecture at
    every relative ``classifiers.archs.<arch>.pretrained`` file of ``cfg`` under ``workdir``.
    The workflow refuses a config whose weights file is missing (a paper preset names its
    ImageNet-1K ResNet-50), so a dry run without data still needs the file."""
    import os
    from pathlib import Path

    def place(cfg: dict, workdir) -> None:
        for name, arch in cfg["classifiers"]["archs"].items():
            pre = arch.get("pretrained")
            if isinstance(pre, str) and not Path(pre).is_absolute():
                dest = Path(workdir) / pre
                dest.parent.mkdir(parents=True, exist_ok=True)
                if not dest.exists():
                    os.symlink(_random_timm_weights(arch.get("model", name)), dest)

    return place
