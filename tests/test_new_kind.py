"""A new experiment kind is added the documented way, touching nothing central: in a copy of
the repository, a toy kind that reads one world's samples and splits (a histogram of the exact
entropy H(p(y|x)) over its test rows: one figure, one number, one data file whose columns its
package describes) gets its package, its name in `oracle.experiments.PACKAGES` and an entry in
config.yaml, and nothing else. Then Snakemake plans its jobs (a dry run: its collect job reads
the world's samples and splits, its figure and numbers follow), the columns its collect writes
are the ones its package describes, and the suite's column, docs and kind-contract checks
(tests/test_columns.py, tests/test_experiment_kinds.py) pass in the copy.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

TOY = {
    "__init__.py": '''
        """Experiment kind ``entropy`` (a toy of tests/test_new_kind.py): the exact entropy
        H(p(y|x)) of one world's test rows, as a histogram and its mean (nats)."""

        from __future__ import annotations

        from collections.abc import Mapping
        from typing import Any

        from oracle.errors import ConfigError
        from oracle.experiments import entry_schema, reporting_half
        from oracle.report.columns import CsvColumns
        from oracle.report.paper import Artifact, artifacts_by_name
        from oracle.world_specs import world_specs

        KIND = "entropy"
        DATA = ("rows",)
        COLUMNS = {"rows": CsvColumns("entropy/<experiment>/data/rows.csv", "one test row of the world",
                                      {"row": ("integer", "row of the world's merged samples"),
                                       "entropy": ("nats", "exact entropy H(p(y|x)) of the row")})}
        ARTIFACTS = artifacts_by_name(
            Artifact("entropy_histogram", "figure",
                     "Exact entropy H(p(y|x)) (nats) of every test row of one world, as a histogram."))


        def check(name: str, entry: dict, config: Mapping) -> dict:
            """``world`` names a world of the config."""
            if entry["world"] not in world_specs(config):
                raise ConfigError(f"config key 'experiments.{name}.world': no world named {entry['world']!r}")
            return entry


        def split_needs(spec: Mapping) -> dict[str, dict]:
            """It reads its world's test rows: the world needs a splits file (no training seeds)."""
            return {spec["world"]: {"seeds": [], "max_n": 0}}


        def collect_inputs(name: str, spec: Mapping, paths: Any) -> dict[str, list[str]]:
            """The world's merged samples and its splits."""
            return {"samples": [paths.world_samples(spec["world"])], "splits": [paths.world_splits(spec["world"])]}


        SCHEMA = entry_schema(__file__)
        __getattr__ = reporting_half(__name__)
    ''',
    "schema.yaml": '''
        type: object
        additionalProperties: false
        required: [kind, world]
        properties:
          kind: {const: entropy}
          world: {$ref: "#/$defs/name", description: "the world whose test rows are read"}
    ''',
    "report.py": '''
        """The entropy toy's data, figure and number."""

        from __future__ import annotations

        import numpy as np
        import pandas as pd
        from matplotlib.figure import Figure

        from oracle.classifiers.data import evaluation_set
        from oracle.measures.acquisition import exact_aleatoric
        from oracle.report.figures import save_figure
        from oracle.report.numbers import entry


        def collect(spec, inputs):
            ev = evaluation_set(inputs["samples"][0], inputs["splits"][0])
            return {"rows": pd.DataFrame({"row": ev.rows, "entropy": exact_aleatoric(ev.log_p)})}


        def figure(name, data, spec, stem):
            fig = Figure(figsize=(3.3, 2.5), layout="constrained")
            ax = fig.subplots()
            ax.hist(data["rows"]["entropy"], bins=30)
            ax.set(xlabel="H(p(y|x)) (nats)", ylabel="test rows")
            return save_figure(fig, stem)


        def numbers(data, spec, data_paths):
            h = data["rows"]["entropy"].to_numpy(float)
            return {"mean_entropy": entry(float(h.mean()), "nats", data_paths["rows"], "mean exact entropy of the test rows",
                                          se=float(h.std(ddof=1) / np.sqrt(len(h))), se_over="test rows")}
    ''',
    "findings.py": '''
        def findings(name, data, spec):
            return f"This run: mean H(p(y|x)) {data['rows']['entropy'].mean():.3g} nats over {len(data['rows'])} test rows."
    ''',
}


def _copy_repo(dest: Path) -> None:
    """The repository's files as git sees them (tracked, and untracked but not ignored)."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def _changed(a: Path, b: Path) -> set[str]:
    files = {p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file()}
    files |= {p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file()}
    return {f for f in files if not ((a / f).is_file() and (b / f).is_file()
                                     and (a / f).read_bytes() == (b / f).read_bytes())}


def test_a_sample_reading_kind_needs_its_package_its_name_and_its_entry(tmp_path):
    original, repo = tmp_path / "original", tmp_path / "repo"
    _copy_repo(original)
    shutil.copytree(original, repo)
    package = repo / "oracle" / "experiments" / "entropy"
    package.mkdir()
    for name, text in TOY.items():
        (package / name).write_text(textwrap.dedent(text).lstrip())
    registry = repo / "oracle" / "experiments" / "__init__.py"
    text, n = re.subn(r"^(PACKAGES = \(.*?)\)$", r'\1, "entropy")', registry.read_text(), count=1, flags=re.M | re.S)
    assert n == 1
    registry.write_text(text)
    config = repo / "config.yaml"
    text, n = re.subn(r"^experiments:\n", "experiments:\n  toy:\n    kind: entropy\n    world: base\n",
                      config.read_text(), count=1, flags=re.M)
    assert n == 1
    config.write_text(text)
    assert _changed(original, repo) == {"config.yaml", "oracle/experiments/__init__.py",
                                        *(f"oracle/experiments/entropy/{name}" for name in TOY)}

    run = "results/default"
    targets = [f"{run}/entropy/toy/data/rows.csv", f"{run}/entropy/toy/figures/entropy_histogram.pdf",
               f"{run}/numbers/toy.json"]
    env = {**os.environ, "PYTHONPATH": str(repo)}  # the copy's oracle, not the installed one
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", *targets], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    jobs = re.findall(r"^\s*(?:local)?rule (\w+):\n((?:\s+\S.*\n)+)", out, re.M)
    collect = [body for rule, body in jobs if rule == "entropy_collect"]
    assert len(collect) == 1, out[-4000:]
    assert f"input: {run}/samples/base/all.h5, {run}/splits/base.h5" in collect[0]
    assert {"make_splits", "experiment_figure", "experiment_numbers"} <= {rule for rule, _ in jobs}

    # the columns its collect writes on a small world are the ones its package describes
    check = textwrap.dedent('''
        import sys
        import numpy as np
        from oracle.experiments import kind_module
        from oracle.experiments.columns import data_problems
        from oracle.io.shards import ShardWriter
        from oracle.io.splits import make_splits, write_splits_h5

        rng = np.random.default_rng(0)
        label = rng.integers(0, 3, 60)
        attrs = {"oracle_sha256": "0" * 64, "prior": [0.2, 0.3, 0.5], "label_temperature": 1.0,
                 "base_temperature": 1.0, "seed": 0, "shard": 0, "n_shards": 1, "code_version": "test"}
        samples, splits = sys.argv[1] + "/all.h5", sys.argv[1] + "/splits.h5"
        with ShardWriter(samples, 3, (1, 4, 4), attrs) as w:
            w.write(rng.normal(size=(60, 1, 4, 4)).astype(np.float32), label, label, rng.normal(size=(60, 3)),
                    np.arange(60))
        write_splits_h5(splits, make_splits(60, 20, [0], labels=label, test_seed=0))
        data = kind_module("entropy").collect({"world": "base"}, {"samples": [samples], "splits": [splits]})
        written = {name: list(frame.columns) for name, frame in data.items()}
        assert written == {"rows": ["row", "entropy"]}, written
        print(data_problems("entropy", written))
    ''')
    proc = subprocess.run([sys.executable, "-c", check, str(tmp_path)], cwd=repo, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stdout + proc.stderr[-3000:]
    # the suite's column, docs and kind-contract checks pass with the toy registered (the docs
    # name it in a warning until they are regenerated)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "not slow", "-p", "no:cacheprovider", "-rw",
                           "tests/test_columns.py", "tests/test_experiment_kinds.py"], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "does not list the kinds ['entropy'] yet" in out, out[-4000:]
    assert re.search(r"\b(\d+) passed", out) and "failed" not in out, out[-2000:]
