"""Rule `oracle_import`: a flow checkpoint -> oracle/flow.pt (+ a one-line train_log.jsonl).

Checks the checkpoint's class count against data/train.h5 before loading it.
"""

from oracle.workflow.job_server import delegate

delegate(snakemake)  # noqa: F821 - a local run hands this script to the job server

import json

from oracle.workflow import plan
from oracle.workflow.jobs import record_job, script_job
from oracle.io.images import read_images_h5
from oracle.flow_checkpoints import check_checkpoint_classes, load_flow, load_public_tarflow, save_flow
from oracle.errors import WorldError
from oracle.io.atomic import atomic_output
from oracle.io.hashing import file_sha256

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive

with script_job(sm) as started:
    cfg = sm.params.oracle
    path, fmt = cfg["checkpoint"], cfg["checkpoint_format"]
    train = read_images_h5(sm.input.train)
    _, c, h, w = train["images"].shape
    check_checkpoint_classes(path, fmt, sm.input.train, train["class_names"])
    spec = plan.flow_spec({"oracle": cfg}, c, h, len(train["class_names"]))
    if fmt == "native":
        model, got = load_flow(path)
        for key in ("in_channels", "img_size", "num_classes"):
            if got[key] != spec[key]:
                raise WorldError(f"flow checkpoint {path} has {key}={got[key]} but the data {sm.input.train} need {spec[key]}")
        spec = got
    else:
        model = load_public_tarflow(path, spec)
    sha = file_sha256(path)
    save_flow(sm.output.flow, model, spec, extra={"imported_from": str(path), "checkpoint_format": fmt,
                                                  "checkpoint_sha256": sha, "class_names": train["class_names"]})
    with atomic_output(sm.output.train_log) as tmp:
        tmp.write_text(json.dumps({"imported_from": str(path), "checkpoint_format": fmt, "sha256": sha}) + "\n")
    print(f"imported {path} ({fmt}, sha256 {sha[:12]}) as {sm.output.flow}")
    record_job(sm, started)
