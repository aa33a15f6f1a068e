"""Analytic worlds: isotropic Gaussian classes, whose Bayes error has a closed form (DESIGN
rule 7), and their files (`simplex_means`, `gaussian_world_from_spec`, save and load)."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import torch
from torch import Tensor

from oracle.errors import WorldError

from oracle.worlds.base import World, _positive_float


# --------------------------------------------------------------------------------------------
# Gaussian classes: the analytic world


def _std_normal_cdf(t: float) -> float:
    return 0.5 * math.erfc(-t / math.sqrt(2.0))


class GaussianWorld(World):
    """K isotropic Gaussian classes ``p(x | y=k) = N(mu_k, (std * tau)^2 I)`` in D dimensions.

    Args:
        means: [K, D] class means.
        std: the per-dimension standard deviation at base temperature 1.
        prior: [K] class prior (None = uniform).
        label_temperature: T in ``p(y|x) ∝ pi_y p(x|y)^(1/T)``.
        base_temperature: tau; samples use std*tau and so does the density.
        event_shape: the shape of one sample, e.g. ``(C, H, W)`` with ``C*H*W = D`` so that
            samples are images that classifiers read like flow samples (the density is that
            of the flattened vector, row-major); default ``(D,)``.

    Samples are float64; :mod:`oracle.sample_shards` stores them as float32 and recomputes the
    log-likelihoods at the stored values (DESIGN rule 2).
    """

    def __init__(self, means, std: float, prior=None, label_temperature: float = 1.0,
                 base_temperature: float = 1.0, event_shape: tuple[int, ...] | None = None):
        m = torch.as_tensor(np.asarray(means.detach().cpu() if isinstance(means, Tensor) else means,
                                        dtype=np.float64))
        if m.ndim != 2 or m.shape[0] < 1 or m.shape[1] < 1:
            raise WorldError(f"means has shape {tuple(m.shape)}; expected [K, D] with K, D >= 1")
        if not bool(torch.isfinite(m).all()):
            raise WorldError("means contains a non-finite value")
        super().__init__(m.shape[0], prior, label_temperature, base_temperature)
        self.means = m
        self.std = _positive_float(std, "std")
        D = int(m.shape[1])
        shape = (D,) if event_shape is None else tuple(int(v) for v in event_shape)
        if not shape or min(shape) < 1 or math.prod(shape) != D:
            raise WorldError(f"event_shape={shape} does not hold D={D} dimensions; expected positive sizes with product {D}")
        self.event_shape = shape

    @property
    def dim(self) -> int:
        """D: the number of dimensions (the product of event_shape)."""
        return int(self.means.shape[1])

    @property
    def sigma(self) -> float:
        """The standard deviation actually in use: std * base_temperature."""
        return self.std * self.base_temperature

    def _log_likelihood_classes(self, x: Tensor, classes: Tensor) -> Tensor:
        x64 = x.to(torch.float64).reshape(x.shape[0], self.dim)
        mu = self.means[classes].to(x64.device)                      # [k, D]
        # the direct difference (not ||x||^2 - 2 x.mu + ||mu||^2) avoids cancellation
        sq = ((x64[:, None, :] - mu[None, :, :]) ** 2).sum(-1)     # [n, k]
        s2 = self.sigma ** 2
        return -0.5 * sq / s2 - 0.5 * self.dim * math.log(2.0 * math.pi * s2)

    def _sample_class(self, y: Tensor, generator: torch.Generator | None) -> Tensor:
        device = generator.device if generator is not None else torch.device("cpu")
        eps = torch.randn(y.numel(), self.dim, generator=generator, dtype=torch.float64, device=device)
        return (self.means[y] + self.sigma * eps.to("cpu")).reshape(y.numel(), *self.event_shape)

    def fingerprint(self) -> str:
        h = hashlib.sha256(b"GaussianWorld/v1")
        h.update(self.means.numpy().tobytes())
        h.update(np.float64(self.std).tobytes())
        if self.event_shape != (self.dim,):  # the flat default keeps its historical digest
            h.update(str(self.event_shape).encode())
        return h.hexdigest()

    # -- the closed form --------------------------------------------------------------------------
    def _two_class_geometry(self) -> tuple[float, float, float]:
        if self.num_classes != 2:
            raise WorldError(
                f"GaussianWorld.bayes_error(): no closed form for K={self.num_classes} classes "
                "(only K=2); estimate it by Monte Carlo: oracle.posterior.log_likelihoods -> "
                "log_posterior -> oracle.decomposition.bayes_error"
            )
        delta = float(torch.linalg.vector_norm(self.means[0] - self.means[1])) / self.sigma
        return delta, float(self.prior[0]), float(self.prior[1])

    def bayes_error(self) -> float:
        """Bayes error ``E_x[1 - max_y p(y|x)]`` of the world, for K = 2 classes.

        With label temperature 1 this is the closed form of the misclassification rate of the
        Bayes classifier. Let ``Delta = ||mu_1 - mu_2|| / (std * tau)``; on the line joining
        the means the statistic ``t`` is ``N(+Delta/2, 1)`` under class 1 and ``N(-Delta/2, 1)``
        under class 2, and the Bayes rule picks class 1 iff ``t > c = log(pi_2/pi_1) / Delta``:

            error = pi_1 Phi(c - Delta/2) + pi_2 Phi(-c - Delta/2)

        which is ``Phi(-Delta/2)`` for a uniform prior.

        With label temperature ``T != 1`` the posterior ``p(y|x) ∝ pi_y p(x|y)^(1/T)`` no longer
        is the world's conditional label law, and ``E[1 - max_y p(y|x)]`` has no closed form;
        it is then computed by 1-D adaptive quadrature over ``t`` (:meth:`bayes_error_quadrature`,
        absolute error ~1e-12).

        Raises WorldError for K != 2 (use the Monte Carlo estimate of the pipeline).
        """
        delta, p1, p2 = self._two_class_geometry()
        if self.label_temperature != 1.0:
            return self.bayes_error_quadrature()
        if min(p1, p2) == 0.0:
            return 0.0
        if delta == 0.0:
            return min(p1, p2)
        c = math.log(p2 / p1) / delta
        return p1 * _std_normal_cdf(c - delta / 2) + p2 * _std_normal_cdf(-c - delta / 2)

    def bayes_error_quadrature(self) -> float:
        """``E_x[1 - max_y p(y|x)]`` for K=2 at any label temperature, by 1-D quadrature.

        The posterior depends on x only through ``t`` (see :meth:`bayes_error`):
        ``logit p(1|x) = Delta t / T + log(pi_1/pi_2)``, so
        ``E = ∫ [pi_1 phi(t - Delta/2) + pi_2 phi(t + Delta/2)] sigmoid(-|logit(t)|) dt``.
        At T = 1 this equals the closed form (a test checks it).
        """
        from scipy import integrate, special, stats

        delta, p1, p2 = self._two_class_geometry()
        if min(p1, p2) == 0.0:
            return 0.0
        T = self.label_temperature
        log_ratio = math.log(p1 / p2)
        if delta == 0.0:
            return float(special.expit(-abs(log_ratio)))

        def integrand(t: float) -> float:
            dens = p1 * stats.norm.pdf(t - delta / 2) + p2 * stats.norm.pdf(t + delta / 2)
            return dens * special.expit(-abs(delta * t / T + log_ratio))

        t0 = -T * log_ratio / delta  # the kink of |logit|
        opts = dict(epsabs=1e-13, epsrel=1e-10, limit=200)
        left = integrate.quad(integrand, -np.inf, t0, **opts)[0]
        right = integrate.quad(integrand, t0, np.inf, **opts)[0]
        return left + right


# --------------------------------------------------------------------------------------------
# Gaussian worlds as workflow artifacts (the analytic world of DESIGN rule 7)

#: ``format`` entry of a file written by :func:`save_gaussian_world`.
GAUSSIAN_WORLD_FORMAT = "oracle-gaussian-world"
GAUSSIAN_WORLD_FORMAT_VERSION = 1


def simplex_means(num_classes: int, dim: int, distance: float, seed: int) -> Tensor:
    """K class means at equal pairwise distance ``distance``, centred at 0: Tensor[K, D] float64.

    The means are the vertices of a regular simplex, ``distance / sqrt(2) * q_k`` minus their
    centroid, for K orthonormal directions ``q_k`` drawn at random (QR of a standard normal
    [D, K] matrix from ``numpy.random.default_rng(seed)``, column signs fixed by ``diag(R) > 0``
    so the result does not depend on the LAPACK build). Needs ``K <= D``.

    With two classes and a uniform prior, the Bayes error is ``Phi(-distance / (2 std))``.
    """
    K, D = int(num_classes), int(dim)
    if K < 1 or D < 1 or K > D:
        raise WorldError(f"simplex_means: num_classes={K} equidistant means need 1 <= K <= dim={D}")
    d = float(distance)
    if not math.isfinite(d) or d < 0:
        raise WorldError(f"simplex_means: distance={distance!r}; expected a finite number >= 0")
    g = np.random.default_rng(int(seed)).standard_normal((D, K))
    q, r = np.linalg.qr(g)
    q = q * np.where(np.diag(r) < 0, -1.0, 1.0)
    means = d / math.sqrt(2.0) * q.T
    return torch.from_numpy(means - means.mean(axis=0, keepdims=True))


def gaussian_world_from_spec(spec, prior=None, label_temperature: float = 1.0,
                             base_temperature: float = 1.0) -> GaussianWorld:
    """The image-shaped :class:`GaussianWorld` of a config's ``oracle.gaussian`` section.

    ``spec``: ``{num_classes, channels, image_size, separation, std, seed}``; samples are
    ``[channels, image_size, image_size]``, the means are :func:`simplex_means` at pairwise
    distance ``separation * std`` (separation in units of the per-dimension std).
    """
    missing = [k for k in ("num_classes", "channels", "image_size", "separation", "std", "seed") if k not in spec]
    if missing:
        raise WorldError(f"Gaussian world spec lacks {missing}; expected num_classes, channels, image_size, separation, std, seed")
    shape = (int(spec["channels"]), int(spec["image_size"]), int(spec["image_size"]))
    std = _positive_float(spec["std"], "std")
    means = simplex_means(spec["num_classes"], math.prod(shape), float(spec["separation"]) * std, spec["seed"])
    return GaussianWorld(means, std, prior=prior, label_temperature=label_temperature,
                         base_temperature=base_temperature, event_shape=shape)


def save_gaussian_world(path, world: GaussianWorld, extra: dict | None = None) -> None:
    """Write the density of ``world`` (means, std, event_shape) to ``path`` atomically.

    Prior and temperatures are not stored: like a flow file, the file is the set of
    class-conditional densities, and a run applies its own (pi, T, tau) when loading it.
    The file is a ``torch.save`` dict readable with ``torch.load(..., weights_only=True)``:
    ``{format, format_version, means [K, D] float64, std, event_shape, fingerprint, extra}``.
    """
    from oracle.io.atomic import torch_save_atomic

    if not isinstance(world, GaussianWorld):
        raise WorldError(f"save_gaussian_world: expected a GaussianWorld, got {type(world).__name__}")
    blob = {"format": GAUSSIAN_WORLD_FORMAT, "format_version": GAUSSIAN_WORLD_FORMAT_VERSION,
            "means": world.means.clone(), "std": float(world.std), "event_shape": list(world.event_shape),
            "fingerprint": world.fingerprint(), "extra": dict(extra or {})}
    torch_save_atomic(blob, path)


def _load_blob(path):
    from oracle.io.state_dicts import read_checkpoint

    # mmap: peeking at the format of a large flow file costs no memory
    return read_checkpoint(path, "world file", mmap=True)


def load_gaussian_world(path, prior=None, label_temperature: float = 1.0,
                        base_temperature: float = 1.0) -> GaussianWorld:
    """The :class:`GaussianWorld` saved at ``path`` by :func:`save_gaussian_world`, with this
    prior and these temperatures. Raises DataError for a file of another format and WorldError
    when the stored fingerprint does not match the stored parameters."""
    from oracle.errors import DataError

    blob = _load_blob(path)
    if not isinstance(blob, dict) or blob.get("format") != GAUSSIAN_WORLD_FORMAT:
        got = blob.get("format") if isinstance(blob, dict) else type(blob).__name__
        raise DataError(f"{path} is not a Gaussian world file (format={got!r}; expected {GAUSSIAN_WORLD_FORMAT!r})")
    if int(blob.get("format_version", 0)) > GAUSSIAN_WORLD_FORMAT_VERSION:
        raise DataError(f"{path}: Gaussian world format_version={blob['format_version']} is newer than "
                        f"this code's {GAUSSIAN_WORLD_FORMAT_VERSION}")
    world = GaussianWorld(blob["means"].clone(), blob["std"], prior=prior, label_temperature=label_temperature,
                          base_temperature=base_temperature, event_shape=tuple(blob["event_shape"]))
    if blob.get("fingerprint") not in (None, world.fingerprint()):
        raise WorldError(f"{path}: stored fingerprint {blob['fingerprint'][:12]} does not match its parameters "
                         f"({world.fingerprint()[:12]}); the file is corrupt")
    return world
