"""What the workflow needs beyond the science, one subpackage per concern:

``plan``        what a run is, from its config (light, read at DAG-build time): config loading,
                validation and checks, the plan (worlds, experiments, classifier runs, splits),
                every path of the run (`plan.paths.RunPaths`), the rules' wildcard helpers,
                resources, the rehearsal of a preset
``provenance``  where every artifact came from: the records, the identity check of a job's
                inputs, the start-of-run staleness check
``jobs``        how a rule's script runs: `jobs.run_job` (job server hand-off, input checks,
                logging, threads, one-line errors, provenance), the local job server, the
                oracle-training job with its torchrun launch
``engine``      every Snakemake internal the workflow uses, in one module
``start_check`` the start-of-run check wired to Snakemake

The top layer of the library: only scripts/ and rules/ import it; inside it, each part imports
only the parts listed before it (tests/test_layering.py). What inspects a run rather than
computes it (the audit, run comparison, GPU cost and checks) is in `oracle.tools`.
"""
