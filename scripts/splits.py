"""Rule `make_splits`: one world's fixed test set and one training-pool permutation per
training seed, stratified by the world's label -> splits/<world>.h5 (row indices into
samples/<world>/all.h5)."""

from oracle.workflow.job_server import delegate

delegate(snakemake)  # noqa: F821 - a local run hands this script to the job server

from oracle.io.sample_rows import read_rows
from oracle.io.splits import make_splits, write_splits_h5
from oracle.workflow.jobs import record_job, script_job

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive

with script_job(sm) as started:
    p = sm.params
    labels = read_rows(sm.input.samples, None, fields=("label",))["label"]
    splits = make_splits(len(labels), p.test_size, p.seeds, labels=labels, test_seed=p.test_seed)
    write_splits_h5(sm.output[0], splits)
    print(f"world {sm.wildcards.world}: test {p.test_size}, seeds {p.seeds}, pool {len(labels)}")
    record_job(sm, started, seed=p.test_seed)
