"""Sample shards: determinism, exactness at the stored float32 x, resume, Gaussian end to end."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from scipy import stats

from oracle.decomposition import bayes_error
from oracle.errors import ShardError
from oracle.flow_checkpoints import build_flow
from oracle.posterior import log_posterior
from oracle.io.merge import merge_shards
from oracle.io.shards import partial_path, read_shard, verify_shard
from oracle.sample_shards import batch_seed, draw_labels, label_seed, write_sample_shard
from oracle.worlds import FlowWorld, GaussianWorld


def gaussian_world(**kw):
    means = np.array([[0.0, 0.0, 0.0], [1.6, 0.0, 0.0]])
    return GaussianWorld(means, std=1.0, **kw)


def test_shard_is_deterministic_and_indexed(tmp_path):
    world = gaussian_world(prior=[0.3, 0.7])
    a = write_sample_shard(world, tmp_path / "a.h5", 100, seed=5, shard=2, n_shards=4, batch_size=32, progress=False)
    write_sample_shard(world, tmp_path / "b.h5", 100, seed=5, shard=2, n_shards=4, batch_size=32, progress=False)
    write_sample_shard(world, tmp_path / "c.h5", 100, seed=5, shard=3, n_shards=4, batch_size=32, progress=False)
    ra, rb, rc = (read_shard(tmp_path / f"{s}.h5") for s in "abc")
    for name in ("x", "source_class", "label", "loglik", "index"):
        np.testing.assert_array_equal(ra[name], rb[name])
    assert not np.array_equal(ra["x"], rc["x"])
    np.testing.assert_array_equal(ra["index"], np.arange(200, 300))  # shard * n + i
    np.testing.assert_array_equal(rc["index"], np.arange(300, 400))
    assert a["index_start"] == 200 and a["index_stop"] == 300 and a["rows"] == 100
    assert a["class_counts"] == np.bincount(ra["source_class"], minlength=2).tolist()
    attrs = ra["attrs"]
    assert (attrs["seed"], attrs["shard"], attrs["n_shards"]) == (5, 2, 4)
    np.testing.assert_array_equal(attrs["prior"], [0.3, 0.7])
    assert attrs["oracle_sha256"] == world.fingerprint() and attrs["batch_size"] == 32
    verify_shard(tmp_path / "a.h5")


def test_batch_seeds_differ():
    seeds = {batch_seed(s, sh, b) for s in range(3) for sh in range(3) for b in range(3)}
    assert len(seeds) == 27 and all(0 <= s < 2**63 for s in seeds)
    assert not seeds & {label_seed(s, sh, b) for s in range(3) for sh in range(3) for b in range(3)}


def test_draw_labels_follows_the_posterior():
    """Chi-square goodness of fit of 40,000 draws from three fixed posteriors (scipy)."""
    p = np.array([[0.7, 0.2, 0.1], [0.05, 0.05, 0.9], [1 / 3, 1 / 3, 1 / 3]])
    n = 40000
    labels = draw_labels(torch.log(torch.as_tensor(np.repeat(p, n, axis=0))), torch.Generator().manual_seed(0)).numpy()
    assert labels.dtype == np.int64 and labels.min() >= 0 and labels.max() <= 2
    for i in range(3):
        counts = np.bincount(labels[i * n:(i + 1) * n], minlength=3)
        assert stats.chisquare(counts, n * p[i]).pvalue > 1e-3, (i, counts)
    # a class of probability 0 is never drawn, one of probability 1 always
    certain = draw_labels(torch.log(torch.tensor([[0.0, 1.0, 0.0]] * 500, dtype=torch.float64)),
                          torch.Generator().manual_seed(1))
    assert bool((certain == 1).all())


def test_labels_are_the_source_class_at_t1_and_a_posterior_draw_otherwise(tmp_path):
    """DESIGN rule 8: at T = 1 the source class is a draw from p(y|x); at T != 1 the label is a
    separate seeded draw from p_T(y|x), and the samples themselves do not depend on T."""
    write_sample_shard(gaussian_world(), tmp_path / "t1.h5", 300, seed=2, shard=0, n_shards=1, progress=False)
    write_sample_shard(gaussian_world(label_temperature=3.0), tmp_path / "t3.h5", 300, seed=2, shard=0,
                       n_shards=1, progress=False)
    t1, t3 = read_shard(tmp_path / "t1.h5"), read_shard(tmp_path / "t3.h5")
    np.testing.assert_array_equal(t1["label"], t1["source_class"])
    for name in ("x", "source_class", "loglik"):
        np.testing.assert_array_equal(t1[name], t3[name])
    assert not np.array_equal(t3["label"], t3["source_class"])
    assert "p_T" in t3["attrs"]["label_rule"] and "source class" in t1["attrs"]["label_rule"]


def test_tempered_world_labels_make_p_t_the_true_posterior(tmp_path):
    """Two Gaussian classes at T = 3 (the issue's check of DESIGN rule 8): with labels drawn
    from p_T, the optimal classifier q = p_T has zero epistemic error and no classifier's
    accuracy on the stored labels beats the Bayes accuracy E[max p_T] by more than 3 SE. The
    source class would not do: the best source-label classifier is q = p_1, whose epistemic
    error against p_T is the spurious floor E[KL(p_T || p_1)] > 0, and whose accuracy on the
    source classes exceeds E[max p_T] by far."""
    from oracle.classifiers.evaluate import evaluate_predictions

    world = gaussian_world(label_temperature=3.0)
    write_sample_shard(world, tmp_path / "s.h5", 20000, seed=11, shard=0, n_shards=1, batch_size=4000,
                       progress=False)
    r = read_shard(tmp_path / "s.h5")
    log_pt = log_posterior(r["loglik"], r["attrs"]["prior"], 3.0)
    log_p1 = log_posterior(r["loglik"], r["attrs"]["prior"], 1.0)
    optimal = evaluate_predictions(log_pt, log_pt, r["label"])
    assert optimal["epistemic"]["mean"] == 0.0
    bayes = optimal["bayes_accuracy"]["mean"]
    rng = np.random.default_rng(0)
    uniform = np.log(rng.dirichlet(np.ones(2), size=len(r["label"])))
    always0 = np.log(np.tile([0.9, 0.1], (len(r["label"]), 1)))
    for log_q in (log_pt, log_p1, uniform, always0):
        m = evaluate_predictions(log_q, log_pt, r["label"])
        assert m["acc"]["mean"] <= bayes + 3 * m["acc"]["se"], m["acc"]
    source = evaluate_predictions(log_p1, log_pt, r["source_class"])
    assert source["epistemic"]["mean"] > 0.1  # E[KL(p_T || p_1)]: a floor no classifier can remove
    assert source["acc"]["mean"] > bayes + 10 * source["acc"]["se"]


def test_loglik_is_exact_at_the_stored_float32_x(tmp_path):
    world = gaussian_world(base_temperature=1.7)
    write_sample_shard(world, tmp_path / "s.h5", 64, seed=1, shard=0, n_shards=1, batch_size=20,
                       class_batch=1, progress=False)
    r = read_shard(tmp_path / "s.h5")
    x = r["x"]
    assert x.dtype == np.float32
    cov = 1.7**2 * np.eye(3)
    want = np.stack([stats.multivariate_normal.logpdf(x.astype(np.float64), world.means[k].numpy(), cov)
                     for k in range(2)], 1)
    np.testing.assert_allclose(r["loglik"], want, rtol=0, atol=1e-10)
    # and the float64 sample it was rounded from would give (slightly) different numbers
    x64, _ = world.sample(20, torch.Generator().manual_seed(batch_seed(1, 0, 0)))
    assert np.array_equal(x[:20], x64.float().numpy()) and not np.array_equal(x[:20], x64.numpy())


def test_flow_world_shard_matches_the_flow(tmp_path):
    flow = build_flow(dict(in_channels=1, img_size=4, patch_size=2, channels=16, head_dim=8,
                           num_blocks=2, layers_per_block=1, num_classes=3), seed=0)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in flow.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=gen))
    world = FlowWorld(flow, prior=[0.2, 0.5, 0.3], base_temperature=0.8)
    write_sample_shard(world, tmp_path / "f.h5", 24, seed=2, shard=0, n_shards=1, batch_size=10,
                       class_batch=2, progress=False)
    r = read_shard(tmp_path / "f.h5")
    assert r["x"].shape == (24, 1, 4, 4)
    x = torch.from_numpy(r["x"])
    with torch.no_grad():
        for k in range(3):
            want = flow.log_prob(x, torch.full((24,), k), base_temperature=0.8)
            # a float32 flow run on batches of 10 images x 2 classes here and 24 x 1 there:
            # float32 kernels differ with the shape (and the CPU model), so agreement is
            # float32-close, not bit-exact (float64 flows are checked to 1e-10 elsewhere)
            np.testing.assert_allclose(r["loglik"][:, k], want.numpy(), rtol=1e-5, atol=1e-4)


def test_gaussian_pipeline_end_to_end_matches_closed_form(tmp_path):
    """sample shards -> merge -> stored loglik -> posterior -> Bayes error vs Phi(-d/2sigma)."""
    world = gaussian_world(prior=[0.4, 0.6])
    paths = []
    for s in range(3):
        paths.append(tmp_path / f"shard-{s:04d}.h5")
        write_sample_shard(world, paths[-1], 4000, seed=9, shard=s, n_shards=3, batch_size=1000, progress=False)
    merged = merge_shards(paths, tmp_path / "all.h5")
    r = read_shard(merged)
    assert np.array_equal(r["index"], np.arange(12000))
    a = r["attrs"]
    log_p = log_posterior(r["loglik"], a["prior"], a["label_temperature"])
    est = bayes_error(log_p)
    assert abs(est["mean"] - world.bayes_error()) < 3 * est["se"], (est, world.bayes_error())
    # labels follow the prior
    frac1 = (r["source_class"] == 1).mean()
    assert abs(frac1 - 0.6) < 4 * np.sqrt(0.24 / 12000)


def test_owned_attributes_cannot_be_overridden(tmp_path):
    with pytest.raises(ShardError, match=r"attrs\['seed'\]=4 disagrees"):
        write_sample_shard(gaussian_world(), tmp_path / "s.h5", 10, seed=3, shard=0, n_shards=1,
                           attrs={"seed": 4}, progress=False)
    with pytest.raises(ShardError, match="shard=2, n_shards=2"):
        write_sample_shard(gaussian_world(), tmp_path / "s.h5", 10, seed=3, shard=2, n_shards=2, progress=False)


RESUME_SCRIPT = textwrap.dedent("""
    import os, signal, sys
    import numpy as np
    from oracle.sample_shards import write_sample_shard
    from oracle.worlds import GaussianWorld
    world = GaussianWorld(np.array([[0.0, 0.0, 0.0], [1.6, 0.0, 0.0]]), std=1.0)
    real_sample, calls = world.sample, [0]
    def sample(n, generator=None):
        calls[0] += 1
        # call 1 draws the precision-check samples; killed while batch 3 is being made
        # (call 5): 3 batches are committed
        if calls[0] == 5:
            os.kill(os.getpid(), signal.SIGKILL)
        return real_sample(n, generator)
    world.sample = sample
    write_sample_shard(world, sys.argv[1], 100, seed=4, shard=1, n_shards=2, batch_size=16,
                       progress=False)
""")


def test_killed_shard_resumes_to_the_same_file(tmp_path):
    path = tmp_path / "s.h5"
    res = subprocess.run([sys.executable, "-c", RESUME_SCRIPT, str(path)], capture_output=True)
    assert res.returncode == -signal.SIGKILL, res.stderr.decode()
    assert not path.exists() and partial_path(path).exists()
    with pytest.raises(ShardError):
        read_shard(partial_path(path))
    world = gaussian_world()
    summary = write_sample_shard(world, path, 100, seed=4, shard=1, n_shards=2, batch_size=16, progress=False)
    assert summary["resumed_rows"] == 48
    write_sample_shard(world, tmp_path / "ref.h5", 100, seed=4, shard=1, n_shards=2, batch_size=16,
                       progress=False)
    got, ref = read_shard(path), read_shard(tmp_path / "ref.h5")
    for name in ("x", "source_class", "label", "loglik", "index"):
        np.testing.assert_array_equal(got[name], ref[name])
    assert summary["class_counts"] == np.bincount(ref["source_class"], minlength=2).tolist()
    assert not partial_path(path).exists()


def test_identical_runs_give_identical_flow_and_shard_bytes(tmp_path):
    """The frozen world is byte-reproducible (issue 14, item 3): the same flow saved under two
    names (the workflow saves through a random temporary name) has one sha256, and shards
    sampled from either copy, each recording its flow file's sha256, are identical files. A
    torch.save straight to the file names the archive's root folder after it, which made every
    provenance hash downstream differ between identical runs."""
    from oracle.flow_checkpoints import load_flow, save_flow
    from oracle.io.hashing import file_sha256

    spec = dict(in_channels=1, img_size=4, patch_size=2, channels=16, head_dim=8, num_blocks=2,
                layers_per_block=1, num_classes=2)
    digests = []
    for run in ("a", "b"):
        flow_path = tmp_path / run / f"flow-{run}.pt"
        save_flow(flow_path, build_flow(spec, seed=0), spec, extra={"run": "same"})
        flow, _ = load_flow(flow_path)
        shard = tmp_path / run / "shard-0000.h5"
        write_sample_shard(FlowWorld(flow), shard, 12, seed=1, shard=0, n_shards=1, batch_size=6, progress=False,
                           attrs={"oracle_sha256": file_sha256(flow_path), "code_version": "test"})
        digests.append((file_sha256(flow_path), file_sha256(shard)))
    assert digests[0] == digests[1]
