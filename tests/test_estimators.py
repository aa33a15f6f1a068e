"""oracle.measures.accuracy_estimators: every estimator against a brute-force loop over its equation on
fixed logits, ATC's threshold on cases whose answer is known, and the scores (R^2, Spearman,
MAE) against direct computations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from oracle.errors import OracleError
from oracle.measures import accuracy_estimators as est


def brute_softmax(row):
    m = max(row)
    e = [math.exp(v - m) for v in row]
    return [v / sum(e) for v in e]


def brute_mano(logits, p=4.0, eta=5.0):
    n, k = len(logits), len(logits[0])
    phi = 0.0
    for row in logits:
        for s in brute_softmax(row):
            phi -= math.log(s)
    phi /= n * k
    total = 0.0
    for row in logits:
        if phi <= eta:
            v = [1.0 + q + q * q / 2.0 for q in row]
        else:
            v = [math.exp(q) for q in row]
        for u in v:
            total += abs(u / sum(v)) ** p
    return (total / (n * k)) ** (1.0 / p)


@pytest.fixture
def logits():
    rng = np.random.default_rng(0)
    return rng.normal(size=(40, 5)) * 1.5


def test_mano_taylor_branch_against_brute_force(logits):
    assert est.mano_criterion(logits) <= est.MANO_ETA  # moderate logits: Eq. 6's Taylor branch
    assert est.mano(logits) == pytest.approx(brute_mano(logits.tolist()), rel=1e-12)
    # the equations, not the public code: no row minimum is subtracted after the Taylor step
    v = 1.0 + logits + logits**2 / 2
    shifted = v - v.min(axis=1, keepdims=True)
    code_like = np.mean((shifted / shifted.sum(1, keepdims=True)) ** 4) ** 0.25
    assert abs(est.mano(logits) - code_like) > 1e-3


def test_mano_softmax_branch_against_brute_force(logits):
    confident = logits * 12.0
    assert est.mano_criterion(confident) > est.MANO_ETA
    assert est.mano(confident) == pytest.approx(brute_mano(confident.tolist()), rel=1e-12)
    assert est.mano(logits, p=2.5) == pytest.approx(brute_mano(logits.tolist(), p=2.5), rel=1e-12)


def test_mano_criterion_is_computed_per_test_set(logits):
    # one confident and one uncertain set take different branches, each from its own Phi
    a, b = logits * 12.0, logits * 0.1
    assert est.mano_criterion(a) > est.MANO_ETA >= est.mano_criterion(b)
    assert est.mano(b) == pytest.approx(brute_mano(b.tolist()), rel=1e-12)


def test_probability_estimators_against_brute_force(logits):
    log_q = est.log_softmax(logits)
    rows = [brute_softmax(r) for r in logits.tolist()]
    n, k = len(rows), len(rows[0])
    assert est.confscore(log_q) == pytest.approx(sum(max(r) for r in rows) / n, rel=1e-12)
    mean_h = sum(-sum(p * math.log(p) for p in r) for r in rows) / n
    assert est.entropy_score(log_q) == pytest.approx(1 - mean_h / math.log(k), rel=1e-12)
    # nuclear norm as the sum of square roots of the eigenvalues of Q^T Q (not an SVD)
    q = np.array(rows)
    eig = np.linalg.eigvalsh(q.T @ q)
    assert est.nuclear(log_q) == pytest.approx(np.sqrt(np.clip(eig, 0, None)).sum() / math.sqrt(n * min(n, k)), rel=1e-9)


def test_estimators_on_extreme_predictions():
    k = 4
    sure = np.log(np.eye(k)[[0, 1, 2, 3, 0, 1]] * (1 - 3e-12) + 1e-12)
    uniform = np.full((6, k), -math.log(k))
    assert est.confscore(sure) == pytest.approx(1.0, abs=1e-10) and est.confscore(uniform) == pytest.approx(0.25)
    assert est.entropy_score(sure) == pytest.approx(1.0, abs=1e-9) and est.entropy_score(uniform) == pytest.approx(0.0, abs=1e-12)
    # uniform rows: rank one, singular value ||Q||_F = sqrt(6 / 4); one-hot rows with class counts
    # (2, 2, 1, 1): Q^T Q = diag(counts), singular values sqrt(counts)
    assert est.nuclear(uniform) == pytest.approx(math.sqrt(6 / 4) / math.sqrt(6 * 4), rel=1e-9)
    assert est.nuclear(sure) == pytest.approx((2 * math.sqrt(2) + 2) / math.sqrt(6 * 4), rel=1e-9)


def test_atc_threshold_on_a_constructed_case():
    scores = np.arange(1, 11) / 10.0  # 0.1 ... 1.0, distinct
    correct = np.array([0, 1, 0, 1, 1, 1, 0, 1, 1, 1], bool)  # 7 of 10
    t = est.atc_threshold(scores, correct)
    assert t == pytest.approx(0.3)  # exactly 7 scores lie above 0.3
    assert est.atc_estimate(scores, t) == pytest.approx(0.7)
    assert est.atc_estimate(np.array([0.05, 0.25, 0.35, 0.95]), t) == pytest.approx(0.5)
    assert est.atc_threshold(scores, np.ones(10, bool)) == -math.inf  # all correct: everything counts
    assert est.atc_threshold(scores, np.zeros(10, bool)) == pytest.approx(1.0)  # none: nothing above the max
    # ties: 4 rows at 0.5 and 2 correct of 4 -> the closest achievable fractions are 1 or 0;
    # the lowest threshold among the best ones wins
    assert est.atc_threshold([0.5] * 4, [1, 1, 0, 0]) == -math.inf


def test_fit_atc_matches_the_in_distribution_accuracy(logits):
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 5, len(logits))
    log_q = est.log_softmax(logits)
    acc = np.mean(log_q.argmax(1) == labels)
    thresholds = est.fit_atc(log_q, labels)
    for s in ("mc", "ne"):
        assert est.atc_estimate(est.atc_scores(log_q, s), thresholds[s]) == pytest.approx(acc, abs=1 / len(labels) + 1e-12)
    assert set(est.estimate_all(logits, log_q, thresholds)) == set(est.METHODS)


def brute_spearman(a, b):
    def ranks(v):
        return [sum(1 for w in v if w < x) + (sum(1 for w in v if w == x) + 1) / 2 for x in v]
    ra, rb = ranks(a), ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    return cov / math.sqrt(sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb))


def test_scores_against_direct_computations():
    e = [0.1, 0.4, 0.35, 0.8, 0.9, 0.9]
    t = [0.2, 0.5, 0.3, 0.7, 0.95, 0.85]
    pe, pt = np.array(e), np.array(t)
    pearson = np.sum((pe - pe.mean()) * (pt - pt.mean())) / math.sqrt(np.sum((pe - pe.mean()) ** 2) * np.sum((pt - pt.mean()) ** 2))
    assert est.r2(e, t) == pytest.approx(pearson**2, rel=1e-12)
    assert est.spearman(e, t) == pytest.approx(brute_spearman(e, t), rel=1e-12)
    assert est.spearman(e, [-v for v in t]) == pytest.approx(-brute_spearman(e, t), rel=1e-12)
    assert est.mae(e, t) == pytest.approx(sum(abs(a - b) for a, b in zip(e, t)) / 6, rel=1e-12)
    s = est.score("confscore", e, t)
    assert s["n"] == 6 and s["mae"] == pytest.approx(est.mae(e, t))
    assert math.isnan(est.score("mano", e, t)["mae"])  # a score, not an accuracy
    assert math.isnan(est.r2(e[:2], t[:2])) and math.isnan(est.spearman([1, 1, 1], [1, 2, 3]))
    with pytest.raises(OracleError):
        est.score("nope", e, t)


def transcribed_official_mano(logits, p=4.0, eta=5.0, batch=128):
    """The public MaNo code's steps, transcribed independently: Phi once, the uniform
    cross-entropy of the fifth batch (the code's ``torch.Tensor(loss)`` keeps the last of the
    first five losses), then per batch: softmax or the Taylor step minus each row's minimum,
    L1-normalized rows, ||.||_p / (n K)^(1/p); the mean over batches."""
    rows = [list(map(float, r)) for r in logits]
    batches = [rows[i:i + batch] for i in range(0, len(rows), batch)]
    k = len(rows[0])
    losses = []
    for bt in batches[:5]:
        losses.append(sum(-math.log(s) for r in bt for s in brute_softmax(r)) / (len(bt) * k))
    phi = losses[-1]
    scores = []
    for bt in batches:
        total = 0.0
        for r in bt:
            if phi > eta:
                out = brute_softmax(r)
            else:
                v = [1.0 + q + q * q / 2.0 for q in r]
                m = min(v)
                v = [u - m for u in v]
                out = [u / max(sum(abs(w) for w in v), 1e-12) for u in v]
            total += sum(abs(u) ** p for u in out)
        scores.append(total ** (1.0 / p) / (len(bt) * k) ** (1.0 / p))
    return sum(scores) / len(scores)


@pytest.mark.parametrize("scale", [1.5, 12.0])
def test_mano_official_against_transcription(scale):
    rng = np.random.default_rng(7)
    logits = rng.normal(size=(1000, 10)) * scale  # 8 batches (the last of 104 rows): Phi from 5
    official = est.mano(logits, variant="official")
    assert official == pytest.approx(transcribed_official_mano(logits.tolist()), rel=1e-13, abs=1e-15)
    if scale == 1.5:  # Taylor branch: the two variants differ
        assert abs(official - est.mano(logits)) > 1e-3
    assert est.estimate_all(logits, est.log_softmax(logits), {"mc": 0.5, "ne": -1.0})["mano_official"] == official


def test_mano_official_criterion_is_the_fifth_batch_s():
    rng = np.random.default_rng(3)
    calm, confident = rng.normal(size=(640, 10)) * 0.5, rng.normal(size=(640, 10)) * 30.0
    logits = np.concatenate([calm, confident])
    # the paper's Phi over all rows exceeds eta; the code's, from rows 512-639, does not
    assert est.mano_criterion(logits) > est.MANO_ETA >= est.mano_official_criterion(logits)
    assert est.mano_official_criterion(logits) == pytest.approx(est.mano_criterion(calm[512:]), rel=1e-12)
    assert est.mano(logits, variant="official") == pytest.approx(transcribed_official_mano(logits.tolist()), rel=1e-13)
    # not the mean over the first five batches: a confident fifth batch flips the branch
    sure = confident[:128] / 6.0  # Phi about 8
    five = np.concatenate([calm[:512], sure])
    assert est.mano_official_criterion(five) == pytest.approx(est.mano_criterion(sure), rel=1e-12)
    assert np.mean([est.mano_criterion(five[i:i + 128]) for i in range(0, 640, 128)]) < est.MANO_ETA
    assert est.mano_official_criterion(five) > est.MANO_ETA
    # fewer than five batches: the last one's
    assert est.mano_official_criterion(calm[:300]) == pytest.approx(est.mano_criterion(calm[256:300]), rel=1e-12)
    # a criterion from another set (main.py reuses the first set's) switches the branch
    assert est.mano(calm, variant="official", criterion=10.0) == pytest.approx(
        est.mano(calm, variant="official", criterion=10.0 + 1e-9), rel=1e-15)
    assert est.mano(calm, variant="official", criterion=10.0) != est.mano(calm, variant="official")
    with pytest.raises(OracleError, match="variant='code'"):
        est.mano(logits, variant="code")


def test_mano_official_is_constant_for_two_classes_on_the_taylor_branch():
    # the row minimum subtracted from a 2-class row leaves one zero: every row is one-hot
    logits = np.random.default_rng(5).normal(size=(300, 2))
    assert est.mano_official_criterion(logits) <= est.MANO_ETA
    assert est.mano(logits, variant="official") == pytest.approx(2 ** -0.25, rel=1e-15)
    assert est.mano(logits) != pytest.approx(2 ** -0.25, rel=1e-3)
