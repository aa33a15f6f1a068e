"""Rule `effective_config`: the config this run used (after schema defaults) -> results/<run>/config.yaml."""

from oracle.workflow.jobs import run_job


def main(sm):
    import yaml

    from oracle.io.atomic import atomic_output

    cfg = dict(sm.params.config)
    with atomic_output(sm.output[0]) as tmp:
        tmp.write_text("# the effective config of this run (written by the workflow)\n"
                       + yaml.safe_dump(cfg, sort_keys=False, default_flow_style=None))
    return dict(seed=cfg.get("seed"))


run_job(snakemake, main)  # noqa: F821 - injected by Snakemake's script directive
