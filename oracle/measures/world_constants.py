"""The exact constants of an oracle world, Monte Carlo over its samples: aleatoric floor,
Bayes accuracy and error, I(X;Y); and the closed-form Bayes error beside its estimate."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from oracle.errors import WorldError


#: |closed form - Monte Carlo| <= AGREE_SE * SE counts as agreement.
AGREE_SE = 3.0


def closed_form_comparison(world: Any, monte_carlo: Mapping[str, Any]) -> dict[str, Any] | None:
    """The world's closed-form Bayes error beside its Monte Carlo estimate.

    `monte_carlo` is a `world_constants` result (its ``bayes_error`` {mean, se} and ``n``).
    Returns {"value", "method", "monte_carlo": {mean, se, n}, "z", "agrees_within_3se"}, or
    None when the world has no closed form (`world.bayes_error()` raises WorldError, e.g. K != 2).
    """
    try:
        value = float(world.bayes_error())
    except WorldError as exc:
        print(f"no closed-form Bayes error: {exc}")
        return None
    mean, se = float(monte_carlo["bayes_error"]["mean"]), float(monte_carlo["bayes_error"]["se"])
    diff = mean - value
    return {
        "value": value,
        # T = 1: Phi-formula; T != 1: 1-D quadrature of E[1 - max p(y|x)] (GaussianWorld.bayes_error)
        "method": "closed_form" if world.label_temperature == 1.0 else "quadrature",
        "monte_carlo": {"mean": mean, "se": se, "n": int(monte_carlo["n"])},
        "z": diff / se if se > 0 else (0.0 if diff == 0 else float("inf")),
        "agrees_within_3se": bool(abs(diff) <= AGREE_SE * se),
    }


def world_constants(log_p: np.ndarray, prior: np.ndarray) -> dict[str, Any]:
    """The oracle world's exact constants, Monte Carlo over the rows of ``log_p`` [n, K]:

    ``aleatoric`` E[H(p(y|x))] (nats), ``bayes_accuracy`` E[max p], ``bayes_error``
    E[1 - max p], ``mutual_information_bits`` H(Y) - E[H(Y|x)] with ``normalized`` I/H(Y):
    each ``{"mean", "se"}`` (MI: ``{"bits", "se", "normalized", "h_y_bits"}``), plus ``n``, ``K``
    (``num_classes``, the posterior's width) and ``classes_drawn`` (the classes of positive prior
    [K]: a sub-world such as 3 digits of a 10-class flow draws 3).
    """
    from oracle.decomposition import bayes_accuracy, bayes_error, entropy, mean_se, mutual_information_bits

    return {
        "n": int(log_p.shape[0]),
        "num_classes": int(log_p.shape[1]),
        "classes_drawn": int((np.asarray(prior, dtype=np.float64) > 0).sum()),
        "aleatoric": mean_se(entropy(log_p)),
        "bayes_accuracy": bayes_accuracy(log_p),
        "bayes_error": bayes_error(log_p),
        "mutual_information": mutual_information_bits(log_p, prior),
    }


def world_numbers(constants: Mapping[str, Any], path: str) -> dict[str, dict]:
    """The in-text numbers of one world from its constants.json (``world_constants`` over all
    its samples, and the closed form of an analytic world): aleatoric floor (nats), Bayes error
    and accuracy (fractions), I(X;Y) (bits) and I(X;Y)/H(Y), each ± se over samples; K; the
    sample count. Keys without the ``world.<name>.`` prefix that the merge adds."""
    from oracle.report.numbers import entry

    w = constants["all"]
    n = w["n"]
    mi = w["mutual_information"]
    out = {
        "aleatoric_floor": entry(w["aleatoric"]["mean"], "nats", path,
                                 f"E_x[H(p(y|x))] over all {n} oracle samples of the world (every split)",
                                 se=w["aleatoric"]["se"], se_over="samples"),
        "bayes_error": entry(w["bayes_error"]["mean"], "fraction", path,
                             f"E_x[1 - max_y p(y|x)] over {n} oracle samples", se=w["bayes_error"]["se"],
                             se_over="samples"),
        "bayes_accuracy": entry(w["bayes_accuracy"]["mean"], "fraction", path,
                                f"E_x[max_y p(y|x)] over {n} oracle samples", se=w["bayes_accuracy"]["se"],
                                se_over="samples"),
        "mutual_information": entry(mi["bits"], "bits", path, "I(X;Y) = H(Y) - E_x[H(p(y|x))]", se=mi["se"],
                                    se_over="samples"),
        "normalized_mutual_information": entry(mi["normalized"], "fraction", path, "I(X;Y) / H(Y)",
                                               se=mi["se"] / mi["h_y_bits"], se_over="samples"),
        "num_classes": entry(w["num_classes"], "classes", path, "K, classes of the oracle world"),
        "classes_drawn": entry(w.get("classes_drawn", w["num_classes"]), "classes", path,
                               "classes of positive prior (the classes the world's samples are drawn from)"),
        "n_samples": entry(n, "samples", path, "oracle samples drawn"),
    }
    closed = constants.get("bayes_error_closed_form")
    if isinstance(closed, Mapping) and closed.get("value") is not None:
        out["bayes_error_closed_form"] = entry(
            closed["value"], "fraction", path,
            f"Bayes error of the analytic world by {closed.get('method', 'closed form')} (exact, no sampling); "
            "the Monte Carlo estimate is bayes_error")
    return out
