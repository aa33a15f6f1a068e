# Stage `oracle`: the frozen world -> results/<run>/oracle/flow.pt + train_log.jsonl
# (oracle.world: gaussian -> oracle/gaussian_world.pt). Downstream rules take it as ORACLE_FLOW
# and load either kind with oracle.worlds.world_from_checkpoint.
#
# oracle.checkpoint null: train the flow here (oracle_train). With resources.oracle.gpus > 1
# the script relaunches itself under torchrun (one process per GPU; oracle.flow_training does
# DDP), with nodes > 1 under srun + torchrun (oracle.workflow.config.oracle_launcher). Training
# checkpoints to oracle/ckpt/ (not an output, so Snakemake keeps it when a job dies) and
# resumes from it.
#
# oracle.checkpoint a path: import it (oracle_import), checking its class count against the
# data. The checkpoint is an input only when it exists, so the DAG builds without it; the
# script then names the missing file.
#
# oracle.world gaussian: the analytic world of oracle.gaussian (oracle_gaussian; DESIGN rule 7).
# It reads no real data, so the data stage drops out of the DAG; samples, splits, classifiers
# and analysis run exactly as for a flow, and analysis/world.json gains the closed form.

ORACLE_FLOW = oc.world_file(RUN, config)
ORACLE_LOG = f"{RUN}/oracle/train_log.jsonl"

if oc.world_kind(config) == "gaussian":

    rule oracle_gaussian:
        output:
            world=ORACLE_FLOW,
        params:
            gaussian=oc.gaussian_spec(config),
            config_keys=["oracle.gaussian"],
        log:
            f"{RUN}/logs/oracle_gaussian.log",
        benchmark:
            f"{RUN}/benchmarks/oracle_gaussian.tsv"
        resources:
            **oc.rule_resources(config, "oracle"),
        threads: 1
        conda:
            ENV
        script:
            "../scripts/oracle_gaussian.py"

elif config["oracle"]["checkpoint"] is None:

    rule oracle_train:
        input:
            train=rules.data.output.train,
        output:
            flow=ORACLE_FLOW,
            train_log=ORACLE_LOG,
        params:
            oracle=config["oracle"],
            seed=config["seed"],
            device=config["device"],
            ckpt_dir=f"{RUN}/oracle/ckpt",
            config_keys=["oracle.flow", "oracle.per_class", "oracle.train", "seed"],
        log:
            f"{RUN}/logs/oracle_train.log",
        benchmark:
            f"{RUN}/benchmarks/oracle_train.tsv"
        resources:
            **oc.rule_resources(config, "oracle"),
        threads: oc.rule_threads(config, "oracle")
        conda:
            ENV
        script:
            "../scripts/oracle_train.py"

else:

    rule oracle_import:
        input:
            checkpoint=lambda wildcards: oc.existing([config["oracle"]["checkpoint"]]),
            train=rules.data.output.train,
        output:
            flow=ORACLE_FLOW,
            train_log=ORACLE_LOG,
        params:
            oracle=config["oracle"],
            device=config["device"],
            # a native checkpoint brings its own spec; a public_tarflow one takes oracle.flow
            config_keys=["oracle.checkpoint", "oracle.checkpoint_format"]
            + (
                ["oracle.flow", "oracle.per_class"]
                if config["oracle"]["checkpoint_format"] == "public_tarflow"
                else []
            ),
        log:
            f"{RUN}/logs/oracle_import.log",
        benchmark:
            f"{RUN}/benchmarks/oracle_import.tsv"
        resources:
            **oc.rule_resources(config, "oracle"),
        threads: oc.rule_threads(config, "oracle")
        conda:
            ENV
        script:
            "../scripts/oracle_import.py"


rule oracle:
    input:
        ORACLE_FLOW,
