"""Projected GPU cost of a run, per stage: FLOPs counted on the run's real model shapes, turned
into GPU-hours at a stated fraction of a GPU's vendor peak. A projection, not a measurement.

Units: a FLOP is one floating-point operation (a multiply-add is two), as
``torch.utils.flop_counter.FlopCounterMode`` counts them; peaks in FLOP/s; costs in GPU-hours.

How each stage is counted (every job count and size comes from `oracle.workflow.plan`):

flow training   optimizer steps (`plan.train_steps`) x batch size x the FLOPs of one image's
                forward and backward pass, counted (the flow has no grouped convolutions, for
                which the counter's backward is wrong, see below).
sampling        per image, the inverse pass: every block inverts its T tokens one at a time with
                a key/value cache, T - 1 autoregressive steps per block. One block's inverse is
                counted (every block has the same shape; at three small token counts, the
                quadratic through them evaluated at the real one) and multiplied by the number
                of blocks. These steps are small and sequential, so a GPU reaches a far smaller
                fraction of its peak here than in training: `sampling_launch_floor_h` gives a
                second, latency-bound estimate.
posterior       log p(x|k) for every sample and every class k (one forward pass per (image,
                class) row), on each world's samples and on each noisy test set; the per-shard
                precision check (`samples.precision_rows` rows x K classes in float64, at least
                once per shard) is its own stage, costed at the FP64 peak.
classifiers     per trained model: epochs (`oracle.classifiers.specs.training_epochs`)
                x training rows x 3 x the counted forward FLOPs. The factor 3 (forward + backward)
                is the usual approximation; the counter's own backward is not used because
                torch's flop counter charges a grouped (depthwise) convolution's backward as a
                dense one (MobileNetV3: 27x its forward). Active learning: every round's training.
predictions     one forward pass per row of every prediction job (`plan.prediction_jobs`; a test
                set has the world's test_size rows); active learning: each round's test set, and
                its pool once plus ``mc_samples`` MC-dropout passes when BALD is scored.

Not counted: the data stage, validation (feature networks, FID), per-epoch curve and validation
scoring, attention's causal skipping (SDPA is counted as the full T x T product), data loading.

Models are built on the 'meta' device (a 768-channel 256 px TarFlow costs no memory); timm
classifiers are built on the CPU once and moved there.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from oracle.errors import ConfigError
from oracle.io.data_sets import DATA_SETS, DataSet, preset_data_set


@dataclass(frozen=True)
class GpuPeak:
    """Vendor peak throughput of one GPU, dense (no sparsity), in TFLOP/s."""

    name: str
    bf16_tflops: float
    fp64_tflops: float


#: NVIDIA datasheet peaks, dense: H100 SXM5 (bf16 tensor 989.4, FP64 tensor 66.9 TFLOP/s) and
#: A100 SXM4 80GB (bf16 tensor 312, FP64 tensor 19.5 TFLOP/s).
GPUS = {"H100": GpuPeak("H100 SXM", 989.0, 67.0), "A100": GpuPeak("A100 SXM", 312.0, 19.5)}

#: Fraction of the peak a job is assumed to sustain.
UTILISATION = 0.40

#: Seconds one GPU kernel launch is assumed to take at least (sampling's latency floor).
LAUNCH_S = 5e-6


def data_facts(config: Mapping) -> DataSet:
    """The preset data set of the config's ``run`` (`oracle.io.data_sets.DATA_SETS`: what the
    config cannot say, known only once the data are read); ConfigError naming the run when unknown."""
    run = config.get("run")
    facts = preset_data_set(run)
    if facts is None:
        known = [name for name in DATA_SETS if preset_data_set(name) is not None]
        raise ConfigError(f"config key 'run': no data set facts for {run!r} (known: {', '.join(known)})")
    return facts


# --------------------------------------------------------------------------------------------
# Counting


class _OpCount(TorchDispatchMode):
    """Counts the aten ops dispatched (on a GPU, roughly the kernels launched)."""

    def __init__(self):
        super().__init__()
        self.ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops += 1
        return func(*args, **(kwargs or {}))


def count_flops(fn: Callable[[], object]) -> int:
    """FLOPs of one call of `fn`, counted by FlopCounterMode."""
    counter = FlopCounterMode(display=False)
    with counter:
        fn()
    return int(counter.get_total_flops())


@dataclass(frozen=True)
class FlowFlops:
    """Per image, in FLOPs: ``forward`` (one log p(x|k) row), ``train`` (forward + backward of
    the training loss), ``sample`` (the inverse pass); ``sample_steps`` (sequential steps of the
    inverse pass) and ``sample_ops`` (aten ops it dispatches for a batch, whatever its size)."""

    forward: int
    train: int
    sample: int
    sample_steps: int
    sample_ops: int


def _meta_flow(spec: Mapping):
    from oracle.flow_checkpoints import build_flow
    from oracle.flows import TarFlow

    with torch.device("meta"):
        flow = build_flow(dict(spec))
    if not isinstance(flow, TarFlow):
        raise ConfigError("oracle.per_class: per-class flows are not costed (the presets train one conditional flow)")
    for block in flow.blocks:
        # build_flow makes the causal (lower-triangular) mask; a meta buffer has no values to test
        block.attention_mask = lambda: True
    return flow


def _reverse_counts(spec: Mapping, tokens: int) -> tuple[int, int]:
    """(FLOPs, aten ops) of one block's inverse pass for one image of a flow like `spec` but
    with `tokens` tokens (an image one patch high and `tokens` patches wide)."""
    p = int(spec["patch_size"])
    flow = _meta_flow({**spec, "img_size": (p, p * tokens)})
    block = flow.blocks[0]
    z = torch.zeros(1, *flow.noise_shape, device="meta")
    y = torch.zeros(1, dtype=torch.long, device="meta") if flow.num_classes else None
    ops = _OpCount()
    with torch.no_grad(), ops:
        flops = count_flops(lambda: block.reverse(z, y))
    return flops, ops.ops


def _quadratic_at(points: list[tuple[int, int]], t: int) -> float:
    """The quadratic through three (x, y) points, at x = t (Lagrange form)."""
    (x0, y0), (x1, y1), (x2, y2) = points
    return (y0 * (t - x1) * (t - x2) / ((x0 - x1) * (x0 - x2)) + y1 * (t - x0) * (t - x2) / ((x1 - x0) * (x1 - x2))
            + y2 * (t - x0) * (t - x1) / ((x2 - x0) * (x2 - x1)))


#: Token counts of the small flows whose inverse passes are counted (`_flow_flops`).
FIT_TOKENS = (3, 4, 5)


def _forward_train_counts(spec: Mapping) -> tuple[int, int]:
    """(FLOPs of one image's forward pass, of its training step) through the whole flow `spec`."""
    flow = _meta_flow(spec)
    c, h, w = flow.event_shape
    x = torch.zeros(1, c, h, w, device="meta")
    y = torch.zeros(1, dtype=torch.long, device="meta") if flow.num_classes else None

    def step():
        z, _, logdets = flow(x, y)
        flow.loss(z, logdets).backward()

    return count_flops(lambda: flow(x, y)), count_flops(step)


@functools.cache
def _flow_flops(key: tuple) -> FlowFlops:
    spec = dict(key)
    flow = _meta_flow(spec)
    # Every block has the same shapes (the alternate ones only reverse the token order, which
    # costs no FLOPs), so the flow's count is affine in its number of blocks: counting flows of 1
    # and 2 blocks gives it exactly, at a quarter of the dispatches of a preset's 8 (a test checks
    # it against a direct count).
    n_blocks = len(flow.blocks)
    if n_blocks <= 2:
        forward, train = _forward_train_counts(spec)
    else:
        one, two = (_forward_train_counts({**spec, "num_blocks": k}) for k in (1, 2))
        forward, train = (a + (n_blocks - 1) * (b - a) for a, b in zip(one, two))
    # The inverse pass of T tokens takes T - 1 steps of fixed cost plus attention over a cache
    # that grows by one token a step: its FLOPs are a quadratic in T and its ops linear. Running
    # it at the real T under the counter takes minutes, so three small T are counted and the
    # quadratic through them is evaluated at the real T (tests check it against a direct count).
    counts = [_reverse_counts(spec, t) for t in FIT_TOKENS]
    t = flow.num_patches
    one_block = _quadratic_at([(tk, f) for tk, (f, _) in zip(FIT_TOKENS, counts)], t)
    ops = _quadratic_at([(tk, o) for tk, (_, o) in zip(FIT_TOKENS, counts)], t)
    return FlowFlops(forward, train, round(one_block) * n_blocks, (t - 1) * n_blocks, round(ops) * n_blocks)


def flow_flops(spec: Mapping) -> FlowFlops:
    """`FlowFlops` of the flow that `oracle.flow_checkpoints.build_flow(spec)` builds."""
    return _flow_flops(tuple(sorted(spec.items())))


@functools.cache
def classifier_forward_flops(model: str, num_classes: int, in_chans: int, img_size: int,
                             input_size: int | None) -> int:
    """FLOPs of one image's forward pass through `oracle.classifiers.build.build_classifier`
    (input pipeline and timm backbone), in eval mode."""
    from oracle.classifiers.build import build_classifier

    net = build_classifier(model, num_classes, in_chans, img_size, input_size, meta=True).to("meta").eval()
    x = torch.zeros(1, in_chans, img_size, img_size, device="meta")
    with torch.no_grad():
        return count_flops(lambda: net(x))


# --------------------------------------------------------------------------------------------
# Stages


@dataclass(frozen=True)
class StageCost:
    """One stage of a run: ``flops`` in total, the precision it runs at (``bf16`` or ``fp64``,
    which peak applies) and ``what`` was counted."""

    stage: str
    flops: float
    precision: str
    what: str

    def gpu_hours(self, gpu: GpuPeak, utilisation: float = UTILISATION) -> float:
        """GPU-hours at `utilisation` of the GPU's peak for this stage's precision."""
        peak = gpu.bf16_tflops if self.precision == "bf16" else gpu.fp64_tflops
        return self.flops / (peak * 1e12 * utilisation) / 3600.0


def _classifier_costs(config: Mapping, facts: DataSet) -> tuple[float, float, int, int]:
    """(training FLOPs, prediction FLOPs, models trained, prediction rows) of every classifier."""
    from oracle.classifiers.specs import training_epochs, validation_rows
    from oracle.workflow import plan

    img = int(config["data"]["image_size"])
    worlds = plan.world_specs(config)

    def fwd(arch: str) -> int:
        a = plan.arch_spec(config, arch)
        return classifier_forward_flops(a["model"], facts.num_classes, facts.channels, img, a.get("input_size"))

    train = pred = 0.0
    models = rows = 0
    specs = plan.experiment_specs(config)
    for run in plan.classifier_runs(config):
        t = plan.training_spec(config, run["experiment"], run["cell"], specs)
        n = t["n"] - validation_rows(t["n"], t.get("val_fraction"))
        epochs = training_epochs(t["training"], t["n"], t.get("val_fraction"))
        train += 3.0 * fwd(run["arch"]) * n * epochs
        models += 1
    names = list(worlds)
    for _exp, arch, _cell, _seed, evalset in plan.prediction_jobs(config):
        m = worlds[plan.parse_evalset(evalset, names)[0]]["test_size"]
        pred += fwd(arch) * m
        rows += m
    for spec in specs.values():
        if spec["kind"] != "active":
            continue
        tr = spec["training"]
        test = worlds[spec["world"]]["test_size"]
        scored = [s for s in spec["strategies"] if s != "random"]
        passes = 1 + (int(spec["mc_samples"]) if "bald" in scored else 0)
        runs = len(spec["strategies"]) * len(spec["seeds"])
        for arch in spec["archs"]:
            f = fwd(arch)
            for r, labelled in enumerate(spec["labels_per_round"]):
                epochs = training_epochs(tr, labelled)
                train += runs * 3.0 * f * labelled * epochs
                models += runs
                pool = spec["initial_size"] + spec["pool_size"] - labelled if r < spec["rounds"] else 0
                pred += runs * f * (test + passes * pool)
                rows += runs * (test + passes * pool)
    return train, pred, models, rows


def stage_costs(config: Mapping, facts: DataSet | None = None) -> list[StageCost]:
    """The `StageCost` of each stage of a validated config (module docstring)."""
    from oracle.workflow import plan

    facts = facts or data_facts(config)
    img = int(config["data"]["image_size"])
    spec = plan.flow_spec(config, facts.channels, img, facts.num_classes)
    ff = flow_flops(spec)
    k = facts.num_classes
    train_cfg = config["oracle"]["train"]
    steps = plan.train_steps(train_cfg, facts.n_train)
    images = steps * int(train_cfg["batch_size"])
    worlds = plan.world_specs(config)
    n_samples = sum(int(w["n_total"]) for w in worlds.values())
    n_shards = sum(int(w["n_shards"]) for w in worlds.values())
    noisy = sorted({e for *_, e in plan.prediction_jobs(config) if plan.parse_evalset(e, list(worlds))[1] is not None})
    noisy_rows = sum(worlds[plan.parse_evalset(e, list(worlds))[0]]["test_size"] for e in noisy)
    rows = int(config["samples"]["precision_rows"])
    c_train, c_pred, models, pred_rows = _classifier_costs(config, facts)
    out = []
    if config["oracle"]["checkpoint"] is None:
        out.append(StageCost("flow training", float(images) * ff.train, "bf16",
                             f"{steps:,} steps x {train_cfg['batch_size']} images ({facts.source})"))
    out += [
        StageCost("sampling", float(n_samples) * ff.sample, "bf16",
                  f"{n_samples:,} samples, {ff.sample_steps:,} sequential steps each"),
        StageCost("posterior", float(n_samples + noisy_rows) * k * ff.forward, "bf16",
                  f"{n_samples + noisy_rows:,} images x {k} classes"
                  + (f" ({len(noisy)} noisy test sets among them)" if noisy else "")),
        StageCost("precision check (float64)", float(n_shards) * rows * k * ff.forward, "fp64",
                  f"{n_shards} shards x {rows} rows x {k} classes, once"),
        StageCost("classifier training", c_train, "bf16", f"{models:,} models (3 x forward FLOPs)"),
        StageCost("predictions", c_pred, "bf16", f"{pred_rows:,} image forward passes"),
    ]
    return out


def sampling_launch_floor_h(config: Mapping, facts: DataSet | None = None, launch_s: float = LAUNCH_S) -> float:
    """GPU-hours of sampling if every aten op of the inverse pass costs `launch_s` seconds and
    nothing else (a batch of ``samples.batch_size`` images shares each op): a latency floor that
    FLOPs do not see."""
    from oracle.workflow import plan

    facts = facts or data_facts(config)
    img = int(config["data"]["image_size"])
    ff = flow_flops(plan.flow_spec(config, facts.channels, img, facts.num_classes))
    batch = int(config["samples"]["batch_size"])
    batches = sum(-(-n // batch) for w in plan.world_specs(config).values()
                  for n in plan.shard_sizes(int(w["n_total"]), int(w["n_shards"])))
    return batches * ff.sample_ops * launch_s / 3600.0


# --------------------------------------------------------------------------------------------
# The table of docs/gpu.md


def _fmt_hours(h: float) -> str:
    return f"{h:,.0f}" if h >= 100 else f"{h:,.1f}" if h >= 0.1 else "< 0.1"


def projection(config: Mapping, stages: list[StageCost], utilisation: float = UTILISATION) -> dict:
    """The projection a dry run prints beside its request (`oracle.workflow.plan.dry_run`, read
    from `oracle.workflow.plan.dry_run.PROJECTION_FILE`): ``config_sha256`` (the config it is of,
    `dry_run.config_fingerprint`), ``utilisation``, ``gpu_hours`` [[GPU name, the run's total],
    ...] in `GPUS` order, and ``flow`` (None without flow training, else ``gpus``:
    ``resources.oracle.gpus``, the total over its nodes; ``wall_h`` [[GPU name, flow training's
    hours on them], ...]). Hours rounded to 0.1 h."""
    from oracle.workflow.plan.dry_run import config_fingerprint

    gpus = list(GPUS.values())
    flow = [s for s in stages if s.stage == "flow training"]
    res = config["resources"]["oracle"]
    n_gpus = int(res["gpus"])
    return {"config_sha256": config_fingerprint(config), "utilisation": utilisation,
            "gpu_hours": [[g.name, round(sum(s.gpu_hours(g, utilisation) for s in stages), 1)] for g in gpus],
            "flow": {"gpus": n_gpus, "wall_h": [[g.name, round(flow[0].gpu_hours(g, utilisation) / n_gpus, 1)]
                                                for g in gpus]} if flow and n_gpus else None}


def cost_table(configs: Mapping[str, Mapping], utilisation: float = UTILISATION,
               costs: Mapping[str, list[StageCost]] | None = None) -> str:
    """Markdown: per config (name -> validated config) and stage, the FLOPs and the GPU-hours on
    each of `GPUS`; per config the total, flow training's wall time on the GPUs its
    ``resources.oracle`` asks for, and sampling's launch-latency floor. `costs`: each config's
    `stage_costs`, when already counted (minutes of counting for the presets)."""
    gpus = list(GPUS.values())
    head = ("| preset | stage | what is counted | PFLOP | " + " | ".join(f"{g.name} GPU-h" for g in gpus) + " |\n"
            + "|---" * (4 + len(gpus)) + "|\n")
    rows, notes = [], []
    for name, config in configs.items():
        stages = costs[name] if costs is not None else stage_costs(config)
        for s in stages:
            unit = " (FP64 peak)" if s.precision == "fp64" else ""
            rows.append(f"| {name} | {s.stage} | {s.what}{unit} | {s.flops / 1e15:,.1f} | "
                        + " | ".join(_fmt_hours(s.gpu_hours(g, utilisation)) for g in gpus) + " |")
        total = [sum(s.gpu_hours(g, utilisation) for s in stages) for g in gpus]
        rows.append(f"| **{name}** | **total** | | {sum(s.flops for s in stages) / 1e15:,.1f} | "
                    + " | ".join(f"**{_fmt_hours(t)}**" for t in total) + " |")
        flow = [s for s in stages if s.stage == "flow training"]
        res = config["resources"]["oracle"]
        if flow:
            wall = ", ".join(f"{flow[0].gpu_hours(g, utilisation) / res['gpus']:,.1f} h on {g.name}s" for g in gpus)
            notes.append(f"- {name}: flow training on the {res['gpus']} GPUs of `resources.oracle` takes {wall} "
                         f"(the job's time limit is {res['runtime'] / 60:,.0f} h; a killed job resumes from its checkpoint).")
        notes.append(f"- {name}: sampling's launch-latency floor ({LAUNCH_S * 1e6:.0f} us per aten op, "
                     f"{config['samples']['batch_size']} images per batch): {sampling_launch_floor_h(config):,.1f} GPU-h.")
    return (head + "\n".join(rows) + "\n\n"
            f"Utilisation {utilisation:.0%} of the dense peak (bf16; FP64 for the float64 precision check).\n\n"
            + "\n".join(notes) + "\n")


def table_and_projections(configs: Mapping[str, Mapping], utilisation: float = UTILISATION) -> tuple[str, dict]:
    """docs/gpu.md's `cost_table` of `configs` (name -> config with its defaults filled in, as the
    Snakefile reads it) and the dry run's data ({"presets": {name: `projection`}}), from one count
    of each config's `stage_costs`."""
    costs = {name: stage_costs(cfg) for name, cfg in configs.items()}
    data = {"generated_by": "scripts/tools/gpu_cost_table.py",
            "presets": {name: projection(cfg, costs[name], utilisation) for name, cfg in configs.items()}}
    return cost_table(configs, utilisation, costs), data
