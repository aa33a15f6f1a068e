"""Rule `make_splits`: a fixed oracle test set and nested training subsets per (N, seed),
stratified by source class -> splits/splits.h5 (row indices into samples/all.h5)."""

from oracle import experiments as ex
from oracle.io.splits import make_splits, write_splits_h5

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive

with ex.script_job(sm.log[0], sm.threads) as started:
    p = sm.params
    labels = ex.read_rows(sm.input.samples, None, fields=("source_class",))["source_class"]
    splits = make_splits(len(labels), p.test_size, p.sizes, p.seeds, labels=labels, test_seed=p.seed)
    write_splits_h5(sm.output[0], splits)
    print(f"test {p.test_size}, sizes {p.sizes}, seeds {p.seeds}, pool {len(labels)}")
    ex.record_job(sm, started)
