"""A figure's layout passes with and without painting, side by side: every figure of the
scaling, active, labels and shift kinds, at the shapes of the default and of every preset (the
synthetic numbers of tests/test_preset_figures.py), saved by `save_figure` twice, interleaved: once with each layout
pass a full ``fig.canvas.draw()`` (the code before `oracle.report.figure_check.lay_out`) and once
with `lay_out` (the draw with matplotlib's no-op renderer methods). Checks that the two write
byte-identical PDF and PNG files and prints the time each took.

    .venv/bin/python scripts/bench/layout.py [--repeat 2] [--kinds scaling active ...]

Prints one Markdown table (docs/benchmarks.md, "A figure laid out without painting").
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]


def _variants():
    """{"draw": patch, "lay_out": patch}: each patch sets the layout pass of `save_figure`'s checks
    (wrap_titles, thin_tick_labels look `lay_out` up in their module at each call)."""
    import oracle.report.figure_check as figure_check

    own = figure_check.lay_out

    def painted(fig):
        fig.canvas.draw()
        return fig.canvas.get_renderer()

    return {"draw": lambda: setattr(figure_check, "lay_out", painted),
            "lay_out": lambda: setattr(figure_check, "lay_out", own)}


def _cases(kinds: list[str]):
    """(label, kind module, frames, spec) of every preset shape of `kinds`."""
    import test_preset_figures as tp

    makers = {"scaling": (tp.SCALING, lambda cfg, spec: tp.scaling_frames(spec)),
              "active": (tp.ACTIVE, lambda cfg, spec: tp.active_frames(spec)),
              "labels": (tp.LABELS, lambda cfg, spec: tp.labels_frames(spec)),
              "shift": (tp.SHIFT, tp.shift_frames)}
    from oracle.experiments import active, labels, scaling, shift

    modules = {"scaling": scaling, "active": active, "labels": labels, "shift": shift}
    for kind in kinds:
        shapes, frames = makers[kind]
        for label, (cfg, spec) in shapes.items():
            yield label, modules[kind], frames(cfg, spec), spec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=2, help="draws of each figure per variant (interleaved)")
    ap.add_argument("--kinds", nargs="+", default=["scaling", "active", "labels", "shift"])
    args = ap.parse_args()
    os.environ["ORACLE_STRICT_FIGURES"] = "1"  # as in the tests: a figure that does not print raises
    variants = _variants()
    seconds = {v: 0.0 for v in variants}
    figures = differing = 0
    with tempfile.TemporaryDirectory() as tmp:
        for label, kind, frames, spec in _cases(args.kinds):
            for name in [n for n, a in kind.ARTIFACTS.items() if a.type == "figure"]:
                written = {}
                for r in range(args.repeat):
                    for v, use in (variants.items() if r % 2 == 0 else reversed(variants.items())):
                        use()
                        t0 = time.perf_counter()
                        out = kind.figure(name, frames, spec, Path(tmp) / f"{v}-{name}")
                        seconds[v] += time.perf_counter() - t0
                        written[v] = {ext: p.read_bytes() for ext, p in out.items()}
                figures += 1
                same = written["draw"] == written["lay_out"]
                differing += not same
                print(f"{label} {name}: {'identical' if same else 'DIFFERS'}; so far draw {seconds['draw']:.1f} s, "
                      f"lay_out {seconds['lay_out']:.1f} s", file=sys.stderr, flush=True)
    print("| layout pass | figures | seconds (all draws) | ratio |\n|---|---:|---:|---:|")
    for v in variants:
        print(f"| {v} | {figures} x {args.repeat} | {seconds[v]:.1f} | {seconds[v] / seconds['draw']:.2f} |")
    print(f"\nbyte-identical PDF and PNG: {figures - differing} of {figures} figures")


if __name__ == "__main__":
    main()
