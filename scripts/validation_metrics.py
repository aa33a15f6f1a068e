"""Rule `validation_metrics`: every oracle validation metric -> validation/metrics.json.

Oracle samples vs real train/test images in the feature spaces the config provides (Inception
for FID/IS, ResNet or a domain CNN trained here for the rest), posterior stability and BPD under
the frozen flow. The logic is oracle.validation.run.run_validation; see its docstring for choices.
"""

from oracle.workflow.jobs import run_job


def main(sm):
    import numpy as np
    from threadpoolctl import threadpool_limits

    from oracle.io.images import read_images_h5
    from oracle.devices import pick_device
    from oracle.flow_checkpoints import load_flow
    from oracle.io.atomic import write_json_atomic
    from oracle.io.sample_rows import read_rows
    from oracle.io.shards import open_samples
    from oracle.validation.run import run_validation
    from oracle.worlds import FlowWorld

    with threadpool_limits(sm.threads):
        v = sm.params.validation
        device = pick_device(sm.params.device)
        train, test = read_images_h5(sm.input.train), read_images_h5(sm.input.test)
        # decoded file attributes (prior, temperatures) without reading any row
        attrs = read_rows(sm.input.samples, np.arange(0), fields=())["attrs"]
        flow, _ = load_flow(sm.input.flow, map_location=device)
        world = FlowWorld(flow, prior=attrs["prior"], label_temperature=float(attrs["label_temperature"]),
                          base_temperature=float(attrs["base_temperature"]))
        feature_net = getattr(sm.output, "feature_net", None)  # only without resnet_weights
        with open_samples(sm.input.samples) as f:
            result = run_validation(
                train["images"], train["labels"], test["images"], test["labels"],
                f["x"], f["source_class"][()], v, world,
                dequant_std=sm.params.dequant_std, seed=sm.params.seed, device=device,
                dataset_name=sm.params.dataset_name, feature_net_path=feature_net,
                class_batch=sm.params.class_batch,
            )
        result["world"] = {"prior": [float(p) for p in attrs["prior"]],
                           "label_temperature": float(attrs["label_temperature"]),
                           "base_temperature": float(attrs["base_temperature"])}
        write_json_atomic(sm.output.metrics, result)
        print({k: result[k] for k in ("counts", "primary_space", "memorization", "timings_s")})
    return dict(extra={"device": str(device)})


run_job(snakemake, main)  # noqa: F821 - injected by Snakemake's script directive
