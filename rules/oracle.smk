# Stage `oracle`: the frozen model of every world -> results/<run>/oracle/flow.pt +
# train_log.jsonl (oracle.world: gaussian -> oracle/gaussian_world.pt). Downstream rules take it
# as ORACLE and load either kind with oracle.worlds.world_from_checkpoint, applying a world's
# prior and temperatures (worlds: in the config).
#
# oracle.checkpoint null: train the flow here (oracle_train). With resources.oracle.gpus > 1
# the script relaunches itself under torchrun (one process per GPU; oracle.flow_training does
# DDP), with nodes > 1 under srun + torchrun (oracle.workflow.plan.resources.oracle_launcher). Training
# checkpoints to oracle/ckpt/ (not an output, so Snakemake keeps it when a job dies) and
# resumes from it.
#
# oracle.checkpoint a path: import it (oracle_import), checking its class count against the
# data. The checkpoint is an input only when it exists, so the DAG builds without it; the
# script then names the missing file.
#
# oracle.world gaussian: the analytic world of oracle.gaussian (oracle_gaussian; DESIGN rule 7).
# It reads no real data, so the data stage drops out of the DAG; samples, splits, classifiers
# and experiments run exactly as for a flow, and samples/<world>/constants.json gains the
# closed form.

if plan.world_kind(config) == "gaussian":

    rule oracle_gaussian:
        output:
            world=ORACLE,
        params:
            gaussian=plan.gaussian_spec(config),
        log:
            f"{LOGS}/oracle_gaussian.log",
        benchmark:
            f"{BENCHMARKS}/oracle_gaussian.tsv"
        resources:
            **res.rule_resources(config, "oracle"),
        threads: 1
        conda:
            ENV
        script:
            "../scripts/oracle_gaussian.py"

elif config["oracle"]["checkpoint"] is None:

    rule oracle_train:
        input:
            train=DATA_TRAIN,
        output:
            flow=ORACLE,
            train_log=ORACLE_LOG,
        params:
            oracle=config["oracle"],
            seed=config["seed"],
            device=config["device"],
            ckpt_dir=f"{RUN}/oracle/ckpt",
        log:
            f"{LOGS}/oracle_train.log",
        benchmark:
            f"{BENCHMARKS}/oracle_train.tsv"
        resources:
            **res.rule_resources(config, "oracle"),
        threads: res.rule_threads(config, "oracle")
        conda:
            ENV
        script:
            "../scripts/oracle_train.py"

else:

    rule oracle_import:
        input:
            checkpoint=lambda wildcards: oc.existing([config["oracle"]["checkpoint"]]),
            train=DATA_TRAIN,
        output:
            flow=ORACLE,
            train_log=ORACLE_LOG,
        params:
            oracle=config["oracle"],
            device=config["device"],
        log:
            f"{LOGS}/oracle_import.log",
        benchmark:
            f"{BENCHMARKS}/oracle_import.tsv"
        resources:
            **res.rule_resources(config, "oracle"),
        threads: res.rule_threads(config, "oracle")
        conda:
            ENV
        script:
            "../scripts/oracle_import.py"


rule oracle:
    input:
        ORACLE,
