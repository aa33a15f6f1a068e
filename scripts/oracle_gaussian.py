"""Rule `oracle_gaussian`: the analytic oracle world of oracle.gaussian -> oracle/gaussian_world.pt.

The file holds the class means, std and image shape (oracle.worlds.save_gaussian_world); the
samples stage loads it with world_from_checkpoint like a flow file and applies the run's prior
and temperatures. No real data are read.
"""

from oracle.workflow.jobs import run_job


def main(sm):
    import math

    import torch

    from oracle.worlds import gaussian_world_from_spec, save_gaussian_world

    spec = dict(sm.params.gaussian)
    world = gaussian_world_from_spec(spec)
    save_gaussian_world(sm.output.world, world, extra={"spec": spec})
    dist = torch.cdist(world.means, world.means)[~torch.eye(world.num_classes, dtype=torch.bool)]
    print(f"Gaussian world: K={world.num_classes}, event_shape={world.event_shape}, std={world.std}, "
          f"pairwise mean distance {float(dist.min()):.6g}..{float(dist.max()):.6g} "
          f"(separation*std={spec['separation'] * spec['std']:.6g}); fingerprint {world.fingerprint()[:12]}")
    if world.num_classes == 2:
        print(f"uniform prior, T=1: Bayes error Phi(-separation/2) = "
              f"{0.5 * math.erfc(spec['separation'] / 2 / math.sqrt(2)):.6g}")
    return dict(seed=spec["seed"])


run_job(snakemake, main)  # noqa: F821 - injected by Snakemake's script directive
