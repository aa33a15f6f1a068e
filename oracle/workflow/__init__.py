"""What the workflow needs beyond the science, one subpackage per concern:

``plan``        what a run is, from its config (light, read at DAG-build time): config loading,
                validation and checks, the plan (worlds, experiments, classifier runs, splits),
                every path of the run (`plan.paths.RunPaths`), the rules' wildcard helpers,
                resources, the rehearsal of a preset
``jobs``        how a rule's script runs: `jobs.run_job` (job server hand-off, input checks,
                logging, threads, one-line errors, provenance), the local job server, the
                oracle-training job with its torchrun launch
``provenance``  where every artifact came from: the records, the identity check of a job's
                inputs, the audit
``gpu``         before GPU-days are spent: the projected cost of a run, the checks of a GPU install

The top layer of the library: only scripts/ and rules/ import it (tests/test_layering.py).
"""
