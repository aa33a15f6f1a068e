"""Oracle worlds: class-conditional densities + a class prior + two temperatures.

A world is the complete specification of the synthetic data distribution that every "exact"
number refers to (DESIGN.md, rule 1):

* class-conditional densities ``p(x | y)`` -- analytic Gaussians (:class:`GaussianWorld`), a
  frozen normalizing flow (:class:`FlowWorld`) or an invertible affine image of another world
  (:class:`AffineWorld`);
* a class prior ``pi`` (float64, sums to 1), from which labels are drawn;
* a *label temperature* ``T``: the world's posterior is ``p(y|x) ∝ pi_y p(x|y)^(1/T)``;
  ``T = 1`` is Bayes' rule (the AFHQ oracle of the paper uses ``T = 500``);
* a *base temperature* ``tau``: the base noise of the generative model is scaled by ``tau``
  (``z ~ N(0, tau^2 I)``, or ``N(mu_k, (std*tau)^2 I)`` for Gaussian classes) *and* the density
  is evaluated under the same scaled base, so ``p(x|y)`` is the exact density of what is
  sampled and posteriors stay exact (Theisen et al., "Evaluating state-of-the-art
  classification models against Bayes optimality", Sec. 3.2). The Bayes error increases with
  ``tau``.

Every world exposes the same small interface, used by :mod:`oracle.posterior` and
:mod:`oracle.sample_shards`::

    world.num_classes: int
    world.prior: Tensor[K] float64          # sums to 1
    world.label_temperature: float
    world.base_temperature: float
    world.event_shape: tuple                # (C, H, W) for flows; (D,) or (C, H, W) for Gaussians
    world.log_likelihood(x, y) -> Tensor[n] float64                 # log p(x_i | y_i), nats
    world.log_likelihood_classes(x, classes) -> Tensor[n, k] float64   # log p(x_i | classes_j)
    world.sample(n, generator) -> (x, y)    # y ~ prior, x ~ p(x | y)
    world.sample_class(y, generator) -> x   # x_i ~ p(x | y_i)
    world.fingerprint() -> str              # sha256 of the density parameters

Log-likelihoods are full densities in nats per example (rule 3) and are returned as float64
on the device of the input ``x``. A non-finite value raises :class:`WorldError`.

On disk a world's densities are a flow file (``oracle.flow_checkpoints.save_flow``) or a Gaussian world
file (:func:`save_gaussian_world`); :func:`world_from_checkpoint` loads either and applies a
prior and temperatures, so the workflow samples both through one code path (DESIGN rule 7);
:func:`sample_world` loads the world a sample file was drawn from, checked against the file.
"""

import os

import numpy as np

from oracle.worlds.base import PRIOR_TOLERANCE, World, validate_prior
from oracle.worlds.flow import AffineWorld, FlowWorld
from oracle.worlds.gaussian import (GAUSSIAN_WORLD_FORMAT, GaussianWorld, _load_blob, gaussian_world_from_spec,
                                    load_gaussian_world, save_gaussian_world, simplex_means)

__all__ = ["PRIOR_TOLERANCE", "World", "validate_prior", "GaussianWorld", "FlowWorld", "AffineWorld",
           "simplex_means", "gaussian_world_from_spec", "save_gaussian_world", "load_gaussian_world",
           "world_from_checkpoint", "sample_world", "GAUSSIAN_WORLD_FORMAT"]


def world_from_checkpoint(path, prior=None, label_temperature: float = 1.0,
                          base_temperature: float = 1.0, map_location="cpu") -> FlowWorld | GaussianWorld:
    """The world saved at ``path``, with this prior and these temperatures.

    A file of ``oracle.flow_checkpoints.save_flow`` gives a :class:`FlowWorld` (on ``map_location``); one
    of :func:`save_gaussian_world` a :class:`GaussianWorld` (computed on CPU in float64). The
    workflow's oracle stage writes either, and everything downstream loads it here.

    Raises WorldError when ``prior`` does not have one entry per class of the file, DataError
    for a missing, unreadable or unknown file.
    """
    from oracle.errors import DataError
    from oracle.flow_checkpoints import FLOW_FORMAT, load_flow

    blob = _load_blob(path)
    fmt = blob.get("format") if isinstance(blob, dict) else None
    del blob
    if fmt == GAUSSIAN_WORLD_FORMAT:
        return load_gaussian_world(path, prior=prior, label_temperature=label_temperature,
                                   base_temperature=base_temperature)
    if fmt != FLOW_FORMAT:
        raise DataError(f"{path} is neither an oracle flow file ({FLOW_FORMAT!r}) nor a Gaussian world file "
                        f"({GAUSSIAN_WORLD_FORMAT!r}); got format={fmt!r}")
    flow, _spec = load_flow(path, map_location=map_location)
    return FlowWorld(flow, prior=prior, label_temperature=label_temperature,
                     base_temperature=base_temperature)


def sample_world(world_path: str | os.PathLike, samples_path: str | os.PathLike, map_location: str = "cpu"):
    """The world a sample file was drawn from: the model file `world_path` (refused unless its
    sha256 is the file's ``oracle_sha256``) with the file's prior and temperatures."""
    from oracle.errors import DataError
    from oracle.io.hashing import file_sha256
    from oracle.io.sample_rows import read_rows

    attrs = read_rows(samples_path, np.arange(0), fields=())["attrs"]
    if file_sha256(world_path) != attrs.get("oracle_sha256"):
        raise DataError(f"{world_path} is not the model {samples_path} was drawn from (its sha256 differs from "
                        "the samples' oracle_sha256); rerun the samples stage")
    return world_from_checkpoint(world_path, prior=attrs["prior"], label_temperature=float(attrs["label_temperature"]),
                                 base_temperature=float(attrs["base_temperature"]), map_location=map_location)
