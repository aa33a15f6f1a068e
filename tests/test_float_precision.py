"""Precision modes of the oracle's log-likelihoods (DESIGN rule 9): the error of each mode
against float64 on the same weights, the automatic choice, and the bound every shard stores."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from oracle.errors import ConfigError
from oracle.flow_checkpoints import build_flow
from oracle.io.merge import merge_shards
from oracle.io.shards import read_shard
from oracle.float_precision import check_mode, fastest_first, matmul_precision
from oracle.float_precision_error import choose_precision, measure_precision, posterior_error
from oracle.posterior import log_likelihoods
from oracle.sample_shards import precision_seed, write_sample_shard
from oracle.worlds import FlowWorld, GaussianWorld


def flow_world(**kw) -> FlowWorld:
    flow = build_flow(dict(in_channels=1, img_size=4, patch_size=2, channels=32, head_dim=16,
                           num_blocks=2, layers_per_block=1, num_classes=3), seed=0)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in flow.named_parameters():
            if "proj_out" in name:
                p.copy_(0.05 * torch.randn(p.shape, generator=gen))
    return FlowWorld(flow, **kw)


@pytest.fixture(scope="module")
def world_and_x():
    world = flow_world(prior=[0.2, 0.5, 0.3])
    x, _ = world.sample(24, torch.Generator().manual_seed(0))
    return world, x.float()


def test_posterior_error_against_a_hand_computation():
    rng = np.random.default_rng(0)
    ref = torch.from_numpy(rng.normal(size=(6, 4)) * 3)
    got = ref + torch.from_numpy(rng.normal(size=(6, 4)) * 1e-3)
    prior = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)
    err = posterior_error(got, ref, prior, temperature=2.0)

    def post(ll):
        a = np.log(prior.numpy()) + ll.numpy() / 2.0
        a = np.exp(a - a.max(axis=1, keepdims=True))
        return a / a.sum(axis=1, keepdims=True)

    p, q = post(ref), post(got)
    assert err["max_abs_dlogp"] == pytest.approx(np.abs(got.numpy() - ref.numpy()).max(), abs=1e-15)
    assert err["max_abs_dp"] == pytest.approx(np.abs(p - q).max(), abs=1e-15)
    assert err["max_kl"] == pytest.approx((p * np.log(p / q)).sum(axis=1).max(), rel=1e-9)


def test_float64_mode_is_the_reference_and_float32_is_close(world_and_x):
    world, x = world_and_x
    assert world.precision == "float32"  # the flow's own dtype by default
    assert measure_precision(world, x, "float64") == {"max_abs_dlogp": 0.0, "max_abs_dp": 0.0, "max_kl": 0.0}
    err = measure_precision(world, x, "float32")
    assert 0.0 < err["max_abs_dlogp"] < 1e-4 and err["max_abs_dp"] < 1e-5
    # float64 scoring is an independent float64 copy of the same weights
    with world.scoring("float64"):
        ll64 = log_likelihoods(world, x)
    flow64 = world._flow64
    assert flow64 is not world.flow and next(flow64.parameters()).dtype == torch.float64
    with torch.no_grad():
        want = torch.stack([flow64.log_prob(x.double(), torch.full((24,), k)) for k in range(3)], dim=1)
    torch.testing.assert_close(ll64, want, rtol=0, atol=1e-10)
    assert world.precision == "float32"  # restored after the block
    assert next(world.flow.parameters()).dtype == torch.float32  # the sampling flow is untouched


def test_bf16_autocast_is_measured_not_assumed(world_and_x):
    world, x = world_and_x
    bf16 = measure_precision(world, x, "bf16")
    fp32 = measure_precision(world, x, "float32")
    assert bf16["max_abs_dlogp"] > 100 * fp32["max_abs_dlogp"]  # bf16 keeps ~3 significant digits
    with world.scoring("bf16"):
        ll = log_likelihoods(world, x)
    assert ll.dtype == torch.float64 and bool(torch.isfinite(ll).all())


def test_choose_takes_the_first_mode_within_tolerance(world_and_x):
    world, x = world_and_x
    assert fastest_first("cpu") == ("float32",) and fastest_first("cuda")[0] == "bf16"
    mode, err = choose_precision(world, x, 1e-4)
    assert mode == "float32" and err["max_abs_dp"] < 1e-4
    # bf16 first: too coarse for 1e-4, so float32 is taken
    assert choose_precision(world, x, 1e-4, candidates=("bf16", "float32"))[0] == "float32"
    # nothing is good enough for a zero tolerance: float64, bound 0
    assert choose_precision(world, x, 1e-300) == ("float64", {"max_abs_dlogp": 0.0, "max_abs_dp": 0.0, "max_kl": 0.0})
    gauss = GaussianWorld(np.eye(2) * 2, std=1.0)
    assert choose_precision(gauss, torch.zeros(3, 2), 1e-4)[0] == "float64"


def test_bad_modes_are_refused_with_the_mode_named(world_and_x):
    world, _ = world_and_x
    with pytest.raises(ConfigError, match="'float16'"):
        world.precision = "float16"
    with pytest.raises(ConfigError, match="CUDA"):
        check_mode("tf32", "cpu")
    with pytest.raises(ConfigError, match="'auto'"):
        check_mode("auto", "cpu")
    assert check_mode("auto", "cpu", allow_auto=True) == "auto"
    with pytest.raises(RuntimeError):
        with world.scoring("float64"):
            raise RuntimeError("inside")
    assert world.precision == "float32"


def test_matmul_precision_is_restored():
    before = torch.get_float32_matmul_precision()
    with matmul_precision("float32", "cpu"):
        assert torch.get_float32_matmul_precision() == before  # CPU: nothing to switch
    assert torch.get_float32_matmul_precision() == before


def test_shards_store_the_mode_and_its_bound_and_merge_keeps_the_largest(tmp_path):
    world = flow_world()
    for shard in (0, 1):
        write_sample_shard(world, tmp_path / f"s{shard}.h5", 12, seed=3, shard=shard, n_shards=2, batch_size=6,
                           progress=False, precision="auto", precision_rows=8)
    attrs = [read_shard(tmp_path / f"s{s}.h5")["attrs"] for s in (0, 1)]
    for s, a in enumerate(attrs):
        assert a["precision"] == "float32" and a["precision_rows"] == 8 and a["precision_tolerance"] == 1e-4
        # the bound is what measure_precision gives on the shard's own check samples
        x, _ = world.sample(8, torch.Generator().manual_seed(precision_seed(3, s)))
        err = measure_precision(world, x.float(), "float32")
        assert a["precision_max_abs_dp"] == err["max_abs_dp"] and a["precision_max_kl"] == err["max_kl"]
    merged = read_shard(merge_shards([tmp_path / "s0.h5", tmp_path / "s1.h5"], tmp_path / "all.h5"))["attrs"]
    assert merged["precision"] == "float32"
    assert merged["precision_max_abs_dlogp"] == max(a["precision_max_abs_dlogp"] for a in attrs)


def test_the_check_does_not_change_the_rows_and_float64_scoring_barely_moves_them(tmp_path):
    world = flow_world()
    write_sample_shard(world, tmp_path / "a.h5", 10, seed=1, shard=0, n_shards=1, batch_size=5, progress=False,
                       precision="float32", precision_rows=4)
    write_sample_shard(world, tmp_path / "b.h5", 10, seed=1, shard=0, n_shards=1, batch_size=5, progress=False,
                       precision="float64", precision_rows=2)
    a, b = read_shard(tmp_path / "a.h5"), read_shard(tmp_path / "b.h5")
    np.testing.assert_array_equal(a["x"], b["x"])
    np.testing.assert_array_equal(a["label"], b["label"])
    assert b["attrs"]["precision"] == "float64" and b["attrs"]["precision_max_abs_dlogp"] == 0.0
    np.testing.assert_allclose(a["loglik"], b["loglik"], rtol=0, atol=max(1e-4, 2 * a["attrs"]["precision_max_abs_dlogp"]))


def test_an_analytic_world_is_float64_with_bound_zero(tmp_path):
    world = GaussianWorld(np.array([[0.0, 0.0], [2.0, 0.0]]), std=1.0)
    write_sample_shard(world, tmp_path / "g.h5", 8, seed=0, shard=0, n_shards=1, progress=False, precision="auto")
    attrs = read_shard(tmp_path / "g.h5")["attrs"]
    assert attrs["precision"] == "float64" and attrs["precision_max_kl"] == 0.0
