"""Rule `oracle_train`: train the flow(s) of the oracle world -> oracle/flow.pt + train_log.jsonl
(oracle.workflow.jobs.oracle_train: where it trains, under torchrun for several GPUs, and how it resumes)."""

from oracle.workflow.jobs.oracle_train import train_oracle

train_oracle(snakemake)  # noqa: F821 - injected by Snakemake's script directive
