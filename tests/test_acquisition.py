"""oracle.measures.acquisition (entropy, exact epistemic KL, BALD, top-b selection) on
constructed posteriors whose right pick is known, against brute-force loops; and MC dropout
(oracle.classifiers.predict.mc_dropout_log_probs): dropout active at scoring time, BatchNorm
in eval mode, the same distribution as a dropout layer left on."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from oracle.classifiers.build import build_classifier
from oracle.classifiers.predict import mc_dropout_log_probs, predict_log_probs
from oracle.errors import ConfigError, OracleError
from oracle.measures import acquisition as acq


def logp(rows) -> np.ndarray:
    """Log-probabilities of probability rows (log 0 = -inf)."""
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(rows, dtype=np.float64))


def brute_entropy(p_row) -> float:
    return -sum(v * math.log(v) for v in p_row if v > 0)


def brute_kl(p_row, q_row) -> float:
    return sum(a * (math.log(a) - math.log(b)) for a, b in zip(p_row, q_row) if a > 0)


def brute_bald(passes) -> list[float]:
    """passes: [T][n][K] probabilities."""
    t, n, k = len(passes), len(passes[0]), len(passes[0][0])
    out = []
    for i in range(n):
        mean = [sum(passes[s][i][c] for s in range(t)) / t for c in range(k)]
        out.append(brute_entropy(mean) - sum(brute_entropy(passes[s][i]) for s in range(t)) / t)
    return out


def random_simplex(rng, n, k, sharp=2.0):
    a = np.exp(rng.normal(size=(n, k)) * sharp)
    return a / a.sum(1, keepdims=True)


# --------------------------------------------------------------------------- scores
def test_entropy_picks_the_flattest_rows():
    q = [[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [1 / 3, 1 / 3, 1 / 3], [0.8, 0.1, 0.1]]
    h = acq.predictive_entropy(logp(q))
    assert h.dtype == np.float64
    np.testing.assert_allclose(h, [0.0, math.log(2), math.log(3), brute_entropy(q[3])], rtol=0, atol=1e-12)
    assert list(acq.select_top(h, 2)) == [2, 1]
    np.testing.assert_allclose(acq.exact_aleatoric(logp(q)), h, rtol=0, atol=0)


def test_exact_epistemic_against_brute_force_and_picks_the_largest_kl():
    rng = np.random.default_rng(0)
    p, q = random_simplex(rng, 50, 4), random_simplex(rng, 50, 4)
    q[7] = p[7]  # a row the model has exactly right: KL 0
    kl = acq.exact_epistemic(np.log(p), np.log(q))
    np.testing.assert_allclose(kl, [brute_kl(a, b) for a, b in zip(p, q)], rtol=1e-12, atol=1e-14)
    assert abs(kl[7]) < 1e-15 and (kl >= -1e-15).all()
    top = acq.select_top(kl, 5)
    assert set(top) == set(np.argsort(-kl)[:5]) and list(top) == sorted(top, key=lambda i: -kl[i])


def test_entropy_and_exact_epistemic_disagree_where_aleatoric_noise_is():
    """Row 0: truly ambiguous (p uniform) and the model knows it (q = p): maximal entropy, no
    epistemic error; row 1: truly certain, the model unsure: lower entropy, large KL. Entropy
    acquires row 0 (nothing to learn), exact epistemic acquires row 1."""
    p = [[0.5, 0.5], [1.0, 0.0], [0.9, 0.1]]
    q = [[0.5, 0.5], [0.3, 0.7], [0.9, 0.1]]
    h = acq.predictive_entropy(logp(q))
    kl = acq.exact_epistemic(logp(p), logp(q))
    assert acq.select_top(h, 1)[0] == 0
    assert acq.select_top(kl, 1)[0] == 1
    np.testing.assert_allclose(kl, [0.0, math.log(1 / 0.3), 0.0], atol=1e-12)


def test_bald_zero_for_agreeing_passes_positive_for_disagreeing_ones():
    agree = np.broadcast_to(np.array([[0.5, 0.5], [0.9, 0.1]]), (6, 2, 2))
    assert np.abs(acq.bald(np.log(agree))).max() < 1e-12
    # two confident passes that disagree: mean [0.5, 0.5], each pass entropy 0 -> ln 2
    disagree = np.array([[[1.0, 0.0]], [[0.0, 1.0]]])
    np.testing.assert_allclose(acq.bald(logp(disagree)), [math.log(2)], atol=1e-12)
    rng = np.random.default_rng(1)
    passes = np.stack([random_simplex(rng, 30, 5) for _ in range(7)])
    got = acq.bald(np.log(passes))
    np.testing.assert_allclose(got, brute_bald(passes.tolist()), rtol=1e-10, atol=1e-12)
    assert (got > 0).all()


def test_bald_separates_what_entropy_cannot():
    """Both rows have predictive entropy ln 2; only row 1's passes disagree."""
    passes = np.array([[[0.5, 0.5], [1.0, 0.0]], [[0.5, 0.5], [0.0, 1.0]]])  # [T=2, n=2, K=2]
    mean = passes.mean(0)
    np.testing.assert_allclose(acq.predictive_entropy(np.log(mean)), [math.log(2)] * 2, atol=1e-12)
    assert list(acq.select_top(acq.bald(logp(passes)), 1)) == [1]


def test_scores_refuse_bad_input():
    with pytest.raises(OracleError, match="log_p"):
        acq.predictive_entropy(np.log([[0.5, 0.6]]))
    with pytest.raises(OracleError, match=r"\[T, n, K\]"):
        acq.bald(np.log([[0.5, 0.5]]))


# --------------------------------------------------------------------------- selection
def test_select_top_breaks_ties_by_index():
    s = np.array([1.0, 3.0, 3.0, 2.0, 3.0, -np.inf])
    assert list(acq.select_top(s, 2)) == [1, 2]
    assert list(acq.select_top(s, 5)) == [1, 2, 4, 3, 0]
    assert list(acq.select_top(np.zeros(4), 4)) == [0, 1, 2, 3]
    assert acq.select_top(s, 0).dtype == np.int64 and len(acq.select_top(s, 0)) == 0
    for bad in (-1, 7, 2.0):
        with pytest.raises(OracleError, match="b="):
            acq.select_top(s, bad)
    with pytest.raises(OracleError, match="NaN"):
        acq.select_top(np.array([0.0, np.nan]), 1)


def test_select_top_with_a_generator_is_a_seeded_uniform_draw_among_ties():
    s = np.array([0.0] * 10 + [5.0])
    draw = acq.select_top(s, 3, np.random.default_rng(3))
    assert draw[0] == 10  # a larger score still wins
    assert list(draw) == list(acq.select_top(s, 3, np.random.default_rng(3)))
    counts = np.zeros(10)
    for seed in range(2000):
        counts[acq.select_top(np.zeros(10), 3, np.random.default_rng(seed))] += 1
    assert np.abs(counts - 600).max() < 120  # 600 +- 6 binomial sd per position


# --------------------------------------------------------------------------- MC dropout
@pytest.fixture(scope="module")
def images():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(12, 1, 8, 8, generator=g) * 0.5).clamp(-1, 1)


def test_mc_dropout_needs_a_dropout_model(images):
    model = build_classifier("test_resnet", 3, 1, 8, seed=0)
    with pytest.raises(ConfigError, match="drop_rate"):
        mc_dropout_log_probs(model, images, 4, seed=0)


def test_mc_dropout_keeps_batchnorm_in_eval_and_is_seeded(images):
    """ResNet (functional dropout before the head, BatchNorm in the body): running statistics
    untouched, every module left in eval mode, passes differ, a seed gives the same passes,
    and drop_rate 0 would give the deterministic prediction (checked via the pre-logits path)."""
    model = build_classifier("test_resnet", 3, 1, 8, seed=0, model_kwargs={"drop_rate": 0.5})
    model.train()
    model(images)  # move the BatchNorm statistics away from their init
    buffers = {k: v.clone() for k, v in model.state_dict().items()}
    out = mc_dropout_log_probs(model, images, 8, seed=1, batch_size=5)
    assert out.shape == (8, 12, 3) and out.dtype == torch.float64
    assert all(torch.equal(buffers[k], v) for k, v in model.state_dict().items())
    assert not any(m.training for m in model.modules())
    assert not torch.allclose(out[0], out[1])
    torch.testing.assert_close(out.exp().sum(-1), torch.ones(8, 12, dtype=torch.float64))
    assert torch.equal(out, mc_dropout_log_probs(model, images, 8, seed=1, batch_size=5))
    assert not torch.equal(out, mc_dropout_log_probs(model, images, 8, seed=2, batch_size=5))
    bb = model.backbone
    features = bb.forward_head(bb.forward_features(model.preprocess(images)), pre_logits=True)
    torch.testing.assert_close(torch.log_softmax(bb.get_classifier()(features).double(), 1),
                               predict_log_probs(model, images), rtol=1e-6, atol=1e-6)


def test_mc_dropout_matches_the_dropout_layer_left_on(images):
    """ViT (an nn.Dropout before the head): the mean predictive distribution of our passes
    equals, within Monte Carlo error, that of the model with its head dropout layer switched to
    train mode at scoring time (the textbook MC dropout, with torch's own masks)."""
    model = build_classifier("test_vit", 3, 1, 8, input_size=32, seed=0, model_kwargs={"drop_rate": 0.5})
    with torch.no_grad():  # spread the head so dropout matters
        model.backbone.head.weight.mul_(20.0)
    t = 600
    ours = mc_dropout_log_probs(model, images, t, seed=0).exp()
    model.eval()
    model.backbone.head_drop.train()
    with torch.random.fork_rng(), torch.no_grad():
        torch.manual_seed(0)
        theirs = torch.stack([torch.softmax(model(images).double(), 1) for _ in range(t)])
    model.eval()
    assert float(theirs.std(0).max()) > 0.05  # the passes do disagree
    se = torch.sqrt((ours.var(0) + theirs.var(0)) / t)
    assert bool(((ours.mean(0) - theirs.mean(0)).abs() <= 5 * se + 1e-9).all())
