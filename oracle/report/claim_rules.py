"""The rules of the claims table (`oracle.report.claims.FINDINGS`), one function per finding:
each takes (numbers.json's dict, the experiment's name, its config entry) and returns (this run's
value, its uncertainty, the verdict, the numbers.json keys read, the intervals compared as
`Check`s), or raises `Missing` / `NotPosed`. Every constant a rule compares with is in
`oracle.report.claim_margins`, beside the paper's sentence or table it comes from."""

from __future__ import annotations

import math

from oracle.report.claim_margins import (ACTIVE_FEWER_MARGIN, ACTIVE_RATIO_MARGIN, BAYES_GAP_PP, FLOOR_SHARE,
                                         MARKED_RATIO, MIN_SIZES, NEAR_PERFECT_ECE, PAPER_FEWER_LABELS,
                                         PAPER_GAIN_RATIO, PAPER_ROWS_PER_CLASS, PAPER_SLOPE_RESNET,
                                         PAPER_SLOPE_VIT, PLATEAU_DROP, PLATEAU_FLOOR_SHARE, SAME_EXPONENT,
                                         SAME_RATE_MIN, SAME_RATE_REL, SHIFT_MIN_CLASS_ROWS, SHIFT_TYPE_PP,
                                         SOFT_LABEL_MASS, STRAIGHT_SLOPE_CHANGE, SUBSTANTIAL_NOISE)
from oracle.report.intervals import (Check, Missing, NotPosed, difference, estimate, keys_of, log_ratio,
                                     r2_text, scaled, straightness, suffixes, value)
from oracle.report.verdicts import combine, sided


def _arch_named(archs: list[str], name: str) -> str | None:
    hits = [a for a in archs if name in a.lower()]
    return hits[0] if hits else None


Judgement = tuple[str, str, str, list[str], list[Check]]


# --------------------------------------------------------------------------- the findings
# Each takes (numbers, experiment name, experiment entry) and returns (this run's value,
# uncertainty, verdict, keys read); it raises Missing or NotPosed.

def _power_law(n, x, spec) -> Judgement:
    archs = suffixes(n, f"{x}.alpha.")
    if not archs:
        raise Missing(f"{x}.alpha.<arch>")
    sizes = int(value(n, f"{x}.n_sizes"))
    if sizes < MIN_SIZES:
        raise NotPosed(f"{sizes} sizes N: a power law needs at least {MIN_SIZES} to be told from any straight line")
    span = math.log(value(n, f"{x}.n_max") / value(n, f"{x}.n_min"))
    parts, text, unc, keys, checks = [], [], [], [], []
    for a in archs:
        alpha, bend = estimate(n, f"{x}.alpha.{a}"), estimate(n, f"{x}.curvature.{a}")
        # the bend a straight line must rule out: the local exponent changing by half of alpha
        # across the grid (`STRAIGHT_SLOPE_CHANGE`)
        ruled_out = STRAIGHT_SLOPE_CHANGE * abs(alpha.value) / (2 * span)
        line = straightness(bend, ruled_out)
        if alpha.side(0.0) == -1 or line == -1:
            parts.append("contradicted")
        elif alpha.side(0.0) == 1 and line == 1:
            parts.append("supported")
        else:
            parts.append("unresolved")
        text.append(f"{a}: alpha {alpha.text()}, log-log curvature {bend.text()} (straight: within ± "
                    f"{ruled_out:.3g}){r2_text(n, f'{x}.kl_r2.{a}')}")
        unc.append(f"{a} alpha {alpha.ci_text()}, curvature {bend.ci_text()}")
        keys += [*alpha.keys, *bend.keys]
        checks += [Check(f"alpha {a}", alpha, 0.0), Check(f"log-log curvature of KL, {a}", bend, 0.0)]
    keys += [f"{x}.n_min", f"{x}.n_max"]
    return "; ".join(text), "; ".join(unc), combine(parts), keys, checks


def _plateau(n, x, spec) -> Judgement:
    if f"{x}.n_sizes" in n and int(value(n, f"{x}.n_sizes")) < 2:
        raise NotPosed("one size N: the total's drop over the last step of N needs two")
    archs = [a for a in suffixes(n, f"{x}.total_drop_last.") if f"{x}.epistemic_max_n.{a}" in n]
    if not archs:
        raise Missing(f"{x}.total_drop_last.<arch> and {x}.epistemic_max_n.<arch>")
    share = {a: value(n, f"{x}.aleatoric.{a}") / (value(n, f"{x}.aleatoric.{a}") + value(n, f"{x}.epistemic_max_n.{a}"))
             for a in archs}
    floored = [a for a in archs if share[a] >= PLATEAU_FLOOR_SHARE]
    if not floored:
        raise NotPosed(f"the aleatoric floor is {', '.join(f'{a} {100 * share[a]:.3g}%' for a in archs)} of the total "
                       f"loss at the largest N (posed from {100 * PLATEAU_FLOOR_SHARE:g}%): a flat total there would be "
                       "a flat KL, not a floor hiding a falling one")
    if f"{x}.n_seeds" in n and int(value(n, f"{x}.n_seeds")) < 2:
        raise NotPosed("one classifier seed: the KL fall over the last step of N needs two for its spread over seeds")
    drops = {a: estimate(n, f"{x}.total_drop_last.{a}") for a in floored}
    flat = [a for a in floored if drops[a].side(PLATEAU_DROP) == -1]
    if all(d.side(PLATEAU_DROP) == 1 for d in drops.values()):
        raise NotPosed(f"the total cross-entropy has not flattened: over the last step of N it fell by "
                       f"{', '.join(f'{a} {100 * d.value:.3g}% ({d.ci_text()})' for a, d in drops.items())} per "
                       f"doubling (flat: an interval below {100 * PLATEAU_DROP:g}%)")
    # an architecture whose total clearly still falls is not asked; one that may or may not be flat
    # leaves its part open
    floored = [a for a in floored if drops[a].side(PLATEAU_DROP) != 1]
    falls = {a: estimate(n, f"{x}.kl_fall_last.{a}") for a in floored}
    parts = [sided(falls[a].side(0.0), +1) if a in flat else "unresolved" for a in floored]
    floor = estimate(n, f"{x}.aleatoric.{floored[0]}")
    text = [f"{a}: floor {100 * share[a]:.3g}% of the total, which fell {100 * drops[a].value:.3g}% per doubling "
            f"({'flat' if a in flat else 'flat or not'}), KL fell {falls[a].text()} nats" for a in floored]
    keys = [*keys_of(*drops.values(), *falls.values(), floor), *(f"{x}.epistemic_max_n.{a}" for a in floored)]
    asymptotes = []
    for a in floored:
        key = f"{x}.total_asymptote.{a}"
        if key in n and n[key].get("value") is not None:
            c = estimate(n, key)
            asymptotes.append(f"{a} c = {c.text()} ({c.ci_text()})")
            keys.append(key)
    fit = ("; fitted to the total alone, L(N) = a N^-b + c puts the floor at " + "; ".join(asymptotes)
           + f" against the exact floor {floor.text()} nats") if asymptotes else ""
    return ("; ".join(text) + fit,
            "; ".join(f"{a} total drop {drops[a].ci_text()}, KL fall {falls[a].ci_text()}" for a in floored),
            combine(parts), keys,
            [*(Check(f"total's drop per doubling, {a}", drops[a], PLATEAU_DROP) for a in floored),
             *(Check(f"KL fall over the last step, {a} (nats)", falls[a], 0.0) for a in floored)])


def _floor_exact(n, x, spec) -> Judgement:
    check = estimate(n, f"{x}.label_check")
    m = int(value(n, f"{x}.n_classifiers"))
    regret = estimate(n, f"{x}.nll_regret_min", m=m)
    parts = ["supported" if check.side(0.0) == 0 else "contradicted",
             "contradicted" if regret.side(0.0) == -1 else "supported"]
    return (f"labels' cross-entropy under p minus E[H(p)]: {check.text()} nats; lowest classifier NLL minus the "
            f"labels' NLL under p, of {m}: {regret.text()} nats",
            f"check {check.ci_text()}; lowest regret {regret.ci_text(f'Bonferroni 95% (m={m})')}",
            combine(parts), [*check.keys, *regret.keys, f"{x}.n_classifiers"],
            [Check("labels' NLL under p - E[H(p)] (nats)", check, 0.0),
             Check("lowest classifier NLL - labels' NLL under p (nats)", regret, 0.0)])


def _two_or_more(n, prefix: str, what: str, one: str) -> list[str]:
    """The key endings under `prefix` (`suffixes`): Missing without any (named ``prefix + what``),
    NotPosed with one (`one` formatted with it): the findings that compare two or more."""
    names = suffixes(n, prefix)
    if not names:
        raise Missing(f"{prefix}{what}")
    if len(names) < 2:
        raise NotPosed(one.format(names[0]))
    return names


def _archs_differ(n, x, spec) -> Judgement:
    archs = _two_or_more(n, f"{x}.epistemic_max_n.", "<arch>",
                         "one architecture ({}): architectures can only differ where there are two")
    kl = {a: value(n, f"{x}.epistemic_max_n.{a}") for a in archs}
    # each pair as larger over smaller KL, so "markedly" is one threshold on one side
    pairs = [(a, b) if kl[a] >= kl[b] else (b, a) for i, a in enumerate(archs) for b in archs[i + 1:]]
    m = len(pairs)
    ratios = {p: log_ratio(n, *(f"{x}.epistemic_max_n.{a}" for a in p), m=m,
                           paired=f"{x}.log_kl_ratio_max_n.{p[0]}.{p[1]}") for p in pairs}
    mark = math.log(MARKED_RATIO)
    widest = max(pairs, key=lambda p: ratios[p].value)
    sides = [r.side(mark) for r in ratios.values()]
    verdict = "supported" if 1 in sides else "contradicted" if all(v == -1 for v in sides) else "unresolved"
    order = sorted(pairs, key=lambda p: -ratios[p].value)  # the widest first
    interval = "; ".join(f"{a} / {b} " + ("no interval (no SE)" if ratios[(a, b)].half is None else
                                          f"Bonferroni 95% (m={m}) CI [{math.exp(ratios[(a, b)].lo):.4g}, "
                                          f"{math.exp(ratios[(a, b)].hi):.4g}]") for a, b in order)
    r = ratios[widest]
    # every pair is a check: the verdict turns on each (one above 2x supports, all below contradict)
    return (f"epistemic KL at the largest N (nats): {', '.join(f'{a} {kl[a]:.4g}' for a in archs)}; largest ratio "
            f"{widest[0]} / {widest[1]} = {math.exp(r.value):.4g}", interval, verdict,
            [f"{x}.epistemic_max_n.{a}" for a in archs] + keys_of(*ratios.values()),
            [Check(f"ln(KL {a} / KL {b}) at N_max", ratios[(a, b)], mark,
                   math.log(0.117 / 0.026) if (a, b) == widest else None) for a, b in order])


def _exponents_differ(n, x, spec) -> Judgement:
    archs = suffixes(n, f"{x}.alpha.")
    resnet, vit = _arch_named(archs, "resnet"), _arch_named(archs, "vit")
    if not archs:
        raise Missing(f"{x}.alpha.<arch>")
    if resnet is None or vit is None:
        raise NotPosed(f"the claim compares a ResNet with a ViT; this experiment has {', '.join(archs)}")
    # paired per seed where the run has it (the same training rows and test rows for both architectures)
    d = difference(n, f"{x}.alpha.{resnet}", f"{x}.alpha.{vit}", paired=f"{x}.alpha_diff.{resnet}.{vit}")
    low = difference(n, f"{x}.log_kl_drop_low.{resnet}", f"{x}.log_kl_drop_low.{vit}",
                     paired=f"{x}.log_kl_drop_low_diff.{resnet}.{vit}")
    # the same rate within ± SAME_EXPONENT contradicts "one stalls where the other scales", however
    # the interval sits about 0
    rate = "contradicted" if d.within(-SAME_EXPONENT, SAME_EXPONENT) else sided(d.side(0.0), +1)
    parts = [rate, sided(low.side(0.0), +1)]
    return (f"alpha {resnet} - alpha {vit} = {d.text()} (the same rate: within ± {SAME_EXPONENT:.3g}); in the "
            f"low-data half of the N grid ln KL fell by {low.text()} more for {resnet} than for {vit}",
            f"exponents {d.ci_text()}; low-data half {low.ci_text()}", combine(parts), keys_of(d, low),
            [Check("alpha ResNet - alpha ViT", d, 0.0, PAPER_SLOPE_RESNET - PAPER_SLOPE_VIT,
                   band=(-SAME_EXPONENT, SAME_EXPONENT)),
             Check("ln KL drop, low-data half: ResNet - ViT", low, 0.0)])


def _size(s: str) -> float:
    return float(s.lstrip("N")) if s.lstrip("N").isdigit() else math.inf


def _soft_label_regime(n, x, spec) -> None:
    """NotPosed where the world's posteriors are (nearly) one-hot over the largest training set
    (`SOFT_LABEL_MASS`)."""
    sizes = [_size(s) for s in suffixes(n, f"{x}.gain.")]
    world = spec.get("world")
    if not sizes or not world or f"world.{world}.bayes_error" not in n:
        return
    mass = value(n, f"world.{world}.bayes_error") * max(sizes)
    if mass < SOFT_LABEL_MASS:
        raise NotPosed(f"world {world}'s posteriors are nearly one-hot: Bayes error x N_max = {mass:.3g} rows of "
                       f"non-argmax mass (posed from {SOFT_LABEL_MASS:g}), so soft and hard labels barely differ")


def _soft_beats_hard(n, x, spec) -> Judgement:
    sizes = sorted(suffixes(n, f"{x}.gain."), key=_size)
    if not sizes:
        raise Missing(f"{x}.gain.N<size>")
    _soft_label_regime(n, x, spec)
    gains = {s: estimate(n, f"{x}.gain.{s}") for s in sizes}
    sides = [g.side(0.0) for g in gains.values()]
    half = len(sides) / 2
    verdict = ("supported" if sides.count(1) > half else "contradicted" if sides.count(-1) >= half
               else "unresolved")
    unit = n[f"{x}.gain.{sizes[0]}"].get("unit", "")
    return ("; ".join(f"{s}: {g.text()}" for s, g in gains.items()) + f" (soft - hard test accuracy, {unit})",
            "; ".join(f"{s} {g.ci_text()}" for s, g in gains.items()), verdict, [f"{x}.gain.{s}" for s in sizes],
            [Check(f"soft - hard accuracy at {s} (pp)", g, 0.0, 1.0) for s, g in gains.items()])


def _soft_calibration(n, x, spec) -> Judgement:
    _soft_label_regime(n, x, spec)
    soft = estimate(n, f"{x}.true_ece_soft_max_n")
    better = estimate(n, f"{x}.true_ece_reduction_max_n")
    parts = [sided(soft.side(NEAR_PERFECT_ECE), -1), sided(better.side(0.0), +1)]
    label_ece = n.get(f"{x}.ece_soft_max_n", {}).get("value")
    beside = f" (against the labels: {label_ece:.4g})" if label_ece is not None else ""
    return (f"true ECE of soft labels {soft.text()}{beside}; hard minus soft {better.text()}",
            f"soft {soft.ci_text()}; hard - soft {better.ci_text()}", combine(parts), keys_of(soft, better),
            [Check("true ECE, soft labels", soft, NEAR_PERFECT_ECE, 0.018), Check("true ECE hard - soft", better, 0.0)])


def _ece_rate(n, x, spec) -> Judgement:
    archs = [a for a in suffixes(n, f"{x}.ece_alpha.") if f"{x}.alpha.{a}" in n]
    if not archs:
        raise Missing(f"{x}.ece_alpha.<arch> and {x}.alpha.<arch>")
    bends = {a: (estimate(n, f"{x}.curvature.{a}"), estimate(n, f"{x}.ece_curvature.{a}")) for a in archs}
    posed = [a for a in archs if all(straightness(b) == 1 for b in bends[a])]
    if not posed:
        raise NotPosed("no architecture has straight log-log curves of both KL and ECE to compare rates (curvature "
                       "of KL, ECE: " + "; ".join(f"{a} {k.ci_text()}, {e.ci_text()}" for a, (k, e) in bends.items())
                       + "; straight where the 95% CI contains 0)")
    m = len(posed)
    diffs = {a: difference(n, f"{x}.ece_alpha.{a}", f"{x}.alpha.{a}", m=m) for a in posed}
    margin = {a: max(SAME_RATE_MIN, SAME_RATE_REL * abs(value(n, f"{x}.alpha.{a}"))) for a in posed}
    if any(d.side(0.0) != 0 for d in diffs.values()):
        verdict = "supported"
    elif all(diffs[a].within(-margin[a], margin[a]) for a in posed):
        verdict = "contradicted"
    else:
        verdict = "unresolved"
    left = [a for a in archs if a not in posed]
    return ("; ".join(f"{a}: {d.text()}" for a, d in diffs.items()) + " (alpha_ECE - alpha_KL)"
            + (f"; not compared (a log-log curve bends or has no interval): {', '.join(left)}" if left else ""),
            "; ".join(f"{a} {d.ci_text(f'Bonferroni 95% (m={m})')}" for a, d in diffs.items()), verdict,
            [*keys_of(*diffs.values()), *keys_of(*(b for a in archs for b in bends[a]))],
            [Check(f"alpha_ECE - alpha_KL, {a}", d, 0.0) for a, d in diffs.items()])


def _r2_beside(n, x) -> str:
    parts = []
    for tag, what in (("kl_y", "KL_y"), ("exact_kl", "exact KL")):
        r2, pts = n.get(f"{x}.r2_drop_vs_{tag}", {}).get("value"), n.get(f"{x}.r2_points_{tag}", {}).get("value")
        if r2 is not None and pts is not None:
            parts.append(f"R^2 of the drop on {what} {r2:.3g} over {int(pts)} configurations")
    return ("; " + "; ".join(parts)) if parts else ""


def _starved(n, key: str) -> None:
    if key in n and value(n, key) < SHIFT_MIN_CLASS_ROWS:
        raise NotPosed(f"the imbalance arm's smallest class has {value(n, key):.0f} training rows: its drop measures a "
                       f"starved class, not the prior (posed from {SHIFT_MIN_CLASS_ROWS}; the paper's has about 400)")


def _shift_type(n, x, spec) -> Judgement:
    _starved(n, f"{x}.noise_vs_imbalance_smallest_class")
    d = estimate(n, f"{x}.noise_vs_imbalance")
    return (f"noise costs {d.text()} pp more accuracy than the imbalance{_r2_beside(n, x)}", d.ci_text(),
            sided(d.side(SHIFT_TYPE_PP), +1), list(d.keys),
            [Check("drop(noise) - drop(imbalance) (pp)", d, SHIFT_TYPE_PP, 20.75 - 0.28)])


def _shift_exact(n, x, spec) -> Judgement:
    _starved(n, f"{x}.variant_vs_imbalance_smallest_class")
    d = estimate(n, f"{x}.variant_vs_imbalance")
    return (f"the base-temperature shift costs {d.text()} pp more accuracy than the imbalance", d.ci_text(),
            sided(d.side(SHIFT_TYPE_PP), +1), list(d.keys),
            [Check("drop(tau shift) - drop(imbalance) (pp)", d, SHIFT_TYPE_PP)])


def _active(n, x, spec) -> Judgement:
    world = spec.get("world")
    noise = value(n, f"world.{world}.bayes_error") if world else None
    if noise is not None and noise < SUBSTANTIAL_NOISE:
        raise NotPosed(f"world {world} has a Bayes error of {100 * noise:.3g}%, not substantial aleatoric noise "
                       f"(posed from {100 * SUBSTANTIAL_NOISE:g}%; ImageNet-64: 4.03%)")
    archs = suffixes(n, f"{x}.gain_ratio.")
    arch = _arch_named(archs, "resnet") or (archs[0] if archs else None)
    if arch is None:
        raise Missing(f"{x}.gain_ratio.<arch>")
    floor, kl = (n.get(k, {}).get("value") for k in (f"world.{world}.aleatoric_floor",
                                                     f"{x}.final_epistemic.{arch}.max_entropy"))
    if floor is not None and kl is not None and floor < FLOOR_SHARE * (floor + kl):
        raise NotPosed(f"on world {world} max entropy's last model has {kl:.3g} nats of epistemic KL beside an "
                       f"aleatoric floor of {floor:.3g}: its entropy is mostly epistemic, so it cannot pick the noisy "
                       f"rows the claim is about (posed where the floor is at least {100 * FLOOR_SHARE:g}% of the loss)")
    ratio, fewer = estimate(n, f"{x}.gain_ratio.{arch}"), estimate(n, f"{x}.fewer_labels.{arch}")
    parts = [sided(ratio.side(ACTIVE_RATIO_MARGIN), +1), sided(fewer.side(ACTIVE_FEWER_MARGIN), +1)]
    rank_key = f"{x}.spearman_epistemic.{arch}.max_entropy"
    beside, rank_keys = "", []
    if n.get(rank_key, {}).get("value") is not None:
        rank = estimate(n, rank_key)
        beside, rank_keys = (f"; over the pool, max-entropy scores rank with the exact epistemic KL at Spearman "
                             f"{rank.text()} ({rank.ci_text()})"), [rank_key]
    return (f"{arch} on world {world} (Bayes error {100 * noise:.3g}%): gain ratio {ratio.text()}x, "
            f"{100 * fewer.value:.3g}% fewer labels{beside}",
            f"ratio {ratio.ci_text()}; fewer labels {fewer.ci_text()}", combine(parts),
            [*ratio.keys, *fewer.keys, f"world.{world}.bayes_error", *rank_keys],
            [Check("gain ratio max epistemic / max entropy", ratio, ACTIVE_RATIO_MARGIN, PAPER_GAIN_RATIO),
             Check("fraction fewer labels", fewer, ACTIVE_FEWER_MARGIN, PAPER_FEWER_LABELS)])


def _classes_drawn(n, world: str | None, fallback_key: str) -> tuple[int, str]:
    """(K, its numbers.json key): the classes a world's rows are drawn from
    (`world.<world>.classes_drawn`: a 3-digit sub-world of a 10-class flow draws 3), else the
    posterior's width at `fallback_key`."""
    key = f"world.{world}.classes_drawn"
    key = key if world and key in n else fallback_key
    return int(value(n, key)), key


def _paper_scale(size: float, k: int, who: str) -> None:
    """NotPosed below Table 1's training rows per class (`PAPER_ROWS_PER_CLASS`)."""
    if size / k < PAPER_ROWS_PER_CLASS:
        raise NotPosed(f"{who} trained on N = {size:,.0f} rows of {k} classes, {size / k:,.0f} a class: the paper's "
                       f"\"approach the Bayes bound\" is said of {PAPER_ROWS_PER_CLASS:,.0f} a class (Table 1: 50,000 "
                       "samples, 3 classes); below it the gap measures the training-set size")


def _bayes_bound(n, x, spec) -> Judgement:
    archs = suffixes(n, f"{x}.bayes_gap.")
    if not archs:
        raise Missing(f"{x}.bayes_gap.<arch>")
    bayes = value(n, f"{x}.test_bayes_accuracy")
    k, k_key = _classes_drawn(n, spec.get("world"), f"{x}.num_classes")
    _paper_scale(value(n, f"{x}.table_n"), k, "the table's classifiers")
    gaps = {a: estimate(n, f"{x}.bayes_gap.{a}") for a in archs}
    parts = []
    for a in archs:
        if gaps[a].side(0.0) == -1:  # above the Bayes accuracy: impossible in expectation
            parts.append("contradicted")
        else:
            parts.append(sided(gaps[a].side(BAYES_GAP_PP), -1))
    return ("; ".join(f"{a}: {gaps[a].text()} pp below Bayes" for a in archs)
            + f" (Bayes accuracy {100 * bayes:.4g}%, K = {k})",
            "; ".join(f"{a} gap {gaps[a].ci_text()}" for a in archs), combine(parts),
            [*keys_of(*gaps.values()), f"{x}.test_bayes_accuracy", k_key, f"{x}.table_n"],
            [Check(f"Bayes accuracy - accuracy, {a} (pp)", gaps[a], BAYES_GAP_PP, 2.80) for a in archs])


def _learner_gap(n, x, spec) -> Judgement:
    worlds = _two_or_more(n, f"{x}.gap.", "<world>",
                          "a learner on one world ({}): the gap can only grow across two temperatures")
    tau = {w: value(n, f"{x}.base_temperature.{w}") for w in worlds}
    worlds.sort(key=lambda w: (tau[w], w))
    k, k_key = _classes_drawn(n, worlds[0], f"{x}.num_classes.{worlds[0]}")
    _paper_scale(value(n, f"{x}.learner_n.{worlds[0]}"), k, "the learner")
    gaps = {w: estimate(n, f"{x}.gap.{w}") for w in worlds}
    easy = worlds[0]
    near = scaled(gaps[easy], 0.0, 100.0)
    d = difference(n, f"{x}.gap.{worlds[-1]}", f"{x}.gap.{easy}")
    parts = [sided(near.side(BAYES_GAP_PP), -1), sided(d.side(0.0), +1)]
    return ("; ".join(f"tau {tau[w]:g}: gap {g.text()}" for w, g in gaps.items())
            + f" (error fractions); at tau {tau[easy]:g} the learner is {near.text()} pp from the Bayes error; "
            f"gap(tau {tau[worlds[-1]]:g}) - gap(tau {tau[easy]:g}) = {d.text()}",
            f"tau {tau[easy]:g} gap {near.ci_text()} pp; difference {d.ci_text()}", combine(parts),
            [*(f"{x}.gap.{w}" for w in worlds), *(f"{x}.base_temperature.{w}" for w in worlds),
             f"{x}.learner_n.{worlds[0]}", k_key],
            [Check(f"test error - Bayes error at tau {tau[easy]:g} (pp)", near, BAYES_GAP_PP),
             Check(f"gap(tau {tau[worlds[-1]]:g}) - gap(tau {tau[easy]:g})", d, 0.0)])


