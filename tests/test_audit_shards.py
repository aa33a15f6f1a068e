"""oracle.tools.audit_shards: every shard row is re-scored by default, so a forgery
of one row with its records re-signed is caught; a sample is drawn from a fresh, printed seed
(issue 38 case 1). Runs on the analytic world of tests/smoke/gaussian.yaml, no workflow."""

from __future__ import annotations

import re
from pathlib import Path

import h5py
import numpy as np
import pytest

from oracle.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def gaussian_run(tmp_path):
    """results/<run> of tests/smoke/gaussian.yaml with its world file and shards (200 rows)."""
    from oracle.sample_shards import write_sample_shard
    from oracle.io.hashing import file_sha256
    from oracle.workflow.plan import shard_ids, shard_sizes, world_specs
    from oracle.workflow.plan.paths import world_file
    from oracle.tools.audit_numbers import load_config
    from oracle.worlds import gaussian_world_from_spec, save_gaussian_world, world_from_checkpoint

    cfg = load_config(REPO / "tests/smoke/gaussian.yaml")
    run = tmp_path / "results" / cfg["run"]
    model = Path(world_file(run.as_posix(), cfg))
    model.parent.mkdir(parents=True)
    save_gaussian_world(model, gaussian_world_from_spec(dict(cfg["oracle"]["gaussian"])))
    for name, spec in world_specs(cfg).items():
        world = world_from_checkpoint(model, prior=spec["prior"], label_temperature=spec["label_temperature"],
                                      base_temperature=spec["base_temperature"])
        sizes = shard_sizes(200, spec["n_shards"])
        for i, sid in enumerate(shard_ids(spec["n_shards"])):
            write_sample_shard(world, run / "samples" / name / f"shard-{sid}.h5", n=sizes[i], seed=spec["seed"],
                               shard=i, n_shards=spec["n_shards"], progress=False, index_offset=sum(sizes[:i]),
                               attrs={"oracle_sha256": file_sha256(model), "code_version": "test"})
    return run, cfg


def _forge_one_row(run: Path, row: int) -> Path:
    shard = run / "samples/base/shard-0001.h5"
    with h5py.File(shard, "r+") as f:
        ll = f["loglik"][row]
        f["loglik"][row] = ll + np.array([3.0] + [0.0] * (len(ll) - 1))
    return shard


def test_an_untouched_run_passes_with_every_row_rescored(gaussian_run):
    from oracle.tools.audit_shards import rescore_shards

    run, cfg = gaussian_run
    problems, notes = rescore_shards(run, cfg)
    assert problems == [], problems
    assert sum("100 row(s) re-scored (all)" in n for n in notes) == 2, notes


def test_a_one_row_forgery_is_caught_by_default(gaussian_run):
    from oracle.tools.audit_shards import rescore_shards

    run, cfg = gaussian_run
    shard = _forge_one_row(run, row=57)
    problems, _ = rescore_shards(run, cfg)
    [problem] = problems
    assert problem.startswith(f"{shard}: log p(x|k) re-scored") and "differs from the stored value by 3" in problem
    assert "(sample 157, class 0)" in problem  # shard 1's rows start at global index 100


def test_a_sample_comes_from_a_fresh_printed_seed_that_draws_the_same_rows_again(gaussian_run):
    from oracle.tools.audit_shards import rescore_shards

    run, cfg = gaussian_run
    seeds = set()
    for _ in range(3):
        _, notes = rescore_shards(run, cfg, rows=4)
        seeds.add(int(re.search(r"drawn with seed (\d+)", notes[0]).group(1)))
    assert len(seeds) == 3, seeds  # 31-bit seeds: a repeat is a one-in-a-billion event
    seed = seeds.pop()
    a = rescore_shards(run, cfg, rows=4, seed=seed)[1]
    assert a == rescore_shards(run, cfg, rows=4, seed=seed)[1] and f"--seed {seed}" in a[0]
    with pytest.raises(ConfigError, match="rows=0"):
        rescore_shards(run, cfg, rows=0)


def test_the_audit_cli_rescores_all_rows_unless_told():
    import argparse

    from oracle.tools.audit import parser
    from oracle.tools.audit_shards import parse_rows

    args = parser().parse_args(["--check-numbers", "x/numbers.json"])
    assert args.rows is None and args.seed is None  # every row; a sample's seed is fresh unless given
    args = parser().parse_args(["--check-numbers", "x/numbers.json", "--rows", "8", "--seed", "5"])
    assert (args.rows, args.seed) == (8, 5)
    assert parse_rows("ALL") is None and parse_rows("0") == 0
    for bad in ("-1", "some"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_rows(bad)
