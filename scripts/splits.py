"""Rule `make_splits`: one world's fixed test set and one training-pool permutation per
training seed, stratified by the world's label -> splits/<world>.h5 (row indices into
samples/<world>/all.h5)."""

from oracle.workflow.jobs import run_job


def main(sm):
    from oracle.io.sample_rows import read_rows
    from oracle.io.splits import make_splits, write_splits_h5

    p = sm.params
    labels = read_rows(sm.input.samples, None, fields=("label",))["label"]
    splits = make_splits(len(labels), p.test_size, p.seeds, labels=labels, test_seed=p.test_seed)
    write_splits_h5(sm.output[0], splits)
    print(f"world {sm.wildcards.world}: test {p.test_size}, seeds {p.seeds}, pool {len(labels)}")
    return dict(seed=p.test_seed)


run_job(snakemake, main)  # noqa: F821 - injected by Snakemake's script directive
