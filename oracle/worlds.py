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
:mod:`oracle.sampling`::

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

On disk a world's densities are a flow file (``oracle.flows.save_flow``) or a Gaussian world
file (:func:`save_gaussian_world`); :func:`world_from_checkpoint` loads either and applies a
prior and temperatures, so the workflow samples both through one code path (DESIGN rule 7).
"""

from __future__ import annotations

import hashlib
import math

import numpy as np
import torch
from torch import Tensor

from oracle.errors import WorldError

PRIOR_TOLERANCE = 1e-6

__all__ = [
    "PRIOR_TOLERANCE",
    "World",
    "GaussianWorld",
    "FlowWorld",
    "AffineWorld",
    "validate_prior",
    "world_from_checkpoint",
    "GAUSSIAN_WORLD_FORMAT",
    "simplex_means",
    "gaussian_world_from_spec",
    "save_gaussian_world",
    "load_gaussian_world",
]


# --------------------------------------------------------------------------------------------
# validation helpers


def validate_prior(prior, num_classes: int, name: str = "prior") -> Tensor:
    """Return ``prior`` as a float64 CPU tensor of shape [K], or raise :class:`WorldError`.

    ``None`` means uniform. Entries must be finite and >= 0 and sum to 1 within
    ``PRIOR_TOLERANCE`` (1e-6); the returned prior is renormalized so it sums to 1 to float64
    precision (the tolerance exists for priors written with few decimals, e.g. 0.7/0.2/0.1).
    """
    if num_classes < 1:
        raise WorldError(f"num_classes={num_classes}: a world needs at least one class")
    if prior is None:
        return torch.full((num_classes,), 1.0 / num_classes, dtype=torch.float64)
    if isinstance(prior, Tensor):
        p = prior.detach().to("cpu", torch.float64)
    else:
        try:
            p = torch.as_tensor(np.asarray(prior, dtype=np.float64))
        except (TypeError, ValueError) as exc:
            raise WorldError(f"{name}={prior!r}: expected a sequence of {num_classes} floats") from exc
    if p.ndim != 1 or p.numel() != num_classes:
        raise WorldError(
            f"{name} has shape {tuple(p.shape)} but the world has K={num_classes} classes; "
            f"expected {num_classes} probabilities"
        )
    if not bool(torch.isfinite(p).all()):
        raise WorldError(f"{name}={p.tolist()} contains a non-finite value")
    if bool((p < 0).any()):
        bad = int(torch.nonzero(p < 0)[0, 0])
        raise WorldError(f"{name}[{bad}]={p[bad].item()!r} is negative; probabilities must be >= 0")
    total = float(p.sum())
    if abs(total - 1.0) > PRIOR_TOLERANCE:
        raise WorldError(
            f"{name}={p.tolist()} sums to {total:.10g}; expected 1 (tolerance {PRIOR_TOLERANCE:g})"
        )
    return p / p.sum()


def _positive_float(value, name: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError) as exc:
        raise WorldError(f"{name}={value!r}: expected a positive finite number") from exc
    if not math.isfinite(v) or v <= 0:
        raise WorldError(f"{name}={value!r}: expected a positive finite number")
    return v


def _check_finite(ll: Tensor, classes: Tensor | None, what: str) -> Tensor:
    """Raise WorldError naming the first non-finite entry of a log-likelihood array."""
    finite = torch.isfinite(ll)
    if not bool(finite.all()):
        bad = torch.nonzero(~finite)[0].tolist()
        i = bad[0]
        value = ll[tuple(bad)].item()
        if ll.ndim == 2 and classes is not None:
            k = int(classes[bad[1]])
            raise WorldError(f"{what}: non-finite log p(x|y) = {value!r} for sample {i}, class {k}")
        raise WorldError(f"{what}: non-finite log p(x|y) = {value!r} for sample {i}")
    return ll


# --------------------------------------------------------------------------------------------
# the shared interface


class World:
    """Base class: prior, temperatures, label sampling and input checks.

    Subclasses implement :meth:`_log_likelihood_classes` (``x`` already checked,
    ``classes`` a CPU LongTensor) and :meth:`_sample_class`, and set :attr:`event_shape`.
    """

    event_shape: tuple[int, ...] = ()

    def __init__(self, num_classes: int, prior=None, label_temperature: float = 1.0,
                 base_temperature: float = 1.0):
        self.num_classes = int(num_classes)
        self.prior = validate_prior(prior, self.num_classes)
        self.label_temperature = _positive_float(label_temperature, "label_temperature")
        self.base_temperature = _positive_float(base_temperature, "base_temperature")

    # -- to be provided by subclasses ---------------------------------------------------------
    def _log_likelihood_classes(self, x: Tensor, classes: Tensor) -> Tensor:  # pragma: no cover
        raise NotImplementedError

    def _sample_class(self, y: Tensor, generator: torch.Generator | None) -> Tensor:  # pragma: no cover
        raise NotImplementedError

    def fingerprint(self) -> str:  # pragma: no cover
        """sha256 hex digest of the density parameters (not prior or temperatures)."""
        raise NotImplementedError

    # -- public interface -----------------------------------------------------------------------
    def _check_x(self, x) -> Tensor:
        if not isinstance(x, Tensor):
            x = torch.as_tensor(np.asarray(x))
        if not (x.is_floating_point()):
            raise WorldError(f"x has dtype {x.dtype}; expected a floating-point array")
        if x.ndim != 1 + len(self.event_shape) or tuple(x.shape[1:]) != tuple(self.event_shape):
            raise WorldError(
                f"x has shape {tuple(x.shape)}; expected [n, {', '.join(map(str, self.event_shape))}]"
            )
        return x

    def _check_classes(self, classes, n: int | None = None, name: str = "classes") -> Tensor:
        c = torch.as_tensor(classes).detach().to("cpu")
        if c.ndim == 0:
            c = c.reshape(1)
        if c.ndim != 1 or (c.numel() and c.is_floating_point()):
            raise WorldError(f"{name} has shape {tuple(c.shape)} and dtype {c.dtype}; expected a 1-D integer array")
        c = c.long()
        if n is not None and c.numel() != n:
            raise WorldError(f"{name} has {c.numel()} entries but x has {n} rows")
        if c.numel() and (int(c.min()) < 0 or int(c.max()) >= self.num_classes):
            bad = int(c[(c < 0) | (c >= self.num_classes)][0])
            raise WorldError(f"{name} contains class {bad}; expected classes in [0, {self.num_classes})")
        return c

    def log_likelihood_classes(self, x, classes) -> Tensor:
        """log p(x_i | y = classes_j) for every pair: Tensor[n, k] float64, nats per example.

        Flows evaluate all ``n*k`` pairs in one forward pass; callers bound ``k`` (see
        :func:`oracle.posterior.log_likelihoods`) to bound memory.
        """
        x = self._check_x(x)
        c = self._check_classes(classes)
        ll = self._log_likelihood_classes(x, c)
        if tuple(ll.shape) != (x.shape[0], c.numel()):
            raise WorldError(
                f"{type(self).__name__} returned log-likelihoods of shape {tuple(ll.shape)}; "
                f"expected {(x.shape[0], c.numel())}"
            )
        return _check_finite(ll.to(torch.float64), c, type(self).__name__)

    def log_likelihood(self, x, y) -> Tensor:
        """log p(x_i | y_i): Tensor[n] float64 in nats.

        Implemented through :meth:`log_likelihood_classes` one class at a time, so it is exactly
        the same arithmetic as the batched path (slow for flows when y has many classes).
        """
        x = self._check_x(x)
        y = self._check_classes(y, n=x.shape[0], name="y")
        out = torch.empty(x.shape[0], dtype=torch.float64, device=x.device)
        for k in torch.unique(y).tolist():
            rows = torch.nonzero(y == k).flatten().to(x.device)
            out[rows] = self.log_likelihood_classes(x[rows], torch.tensor([k]))[:, 0]
        return out

    def sample_labels(self, n: int, generator: torch.Generator | None = None) -> Tensor:
        """y ~ prior: LongTensor[n] on the generator's device (CPU when no generator)."""
        n = int(n)
        if n < 0:
            raise WorldError(f"n={n}: expected a non-negative number of samples")
        device = generator.device if generator is not None else torch.device("cpu")
        if n == 0:
            return torch.empty(0, dtype=torch.long, device=device)
        return torch.multinomial(self.prior.to(device), n, replacement=True, generator=generator)

    def sample_class(self, y, generator: torch.Generator | None = None) -> Tensor:
        """x_i ~ p(x | y_i) at the world's base temperature: Tensor[n, *event_shape]."""
        y = self._check_classes(y, name="y")
        return self._sample_class(y, generator)

    def sample(self, n: int, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
        """Draw (x, y) from the joint: y ~ prior, then x ~ p(x | y). y is a CPU LongTensor[n]."""
        y = self.sample_labels(n, generator).to("cpu")
        return self.sample_class(y, generator), y

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(K={self.num_classes}, event_shape={self.event_shape}, "
                f"label_temperature={self.label_temperature}, base_temperature={self.base_temperature})")


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

    Samples are float64; :mod:`oracle.sampling` stores them as float32 and recomputes the
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
# flows


class FlowWorld(World):
    """A frozen class-conditional flow (``oracle.flows.TarFlow`` or ``PerClassFlows``) as a world.

    The flow must expose ``num_classes`` (>= 1), ``event_shape`` (or ``in_channels`` and
    ``img_size``), ``log_prob(x, y, base_temperature)`` and ``sample(y, base_temperature, generator)``;
    ``log_prob_classes(x, classes[, base_temperature])`` is used when present (one forward
    pass for all n*k pairs), otherwise one ``log_prob`` call per class.

    Inputs are moved to the flow's device and dtype; log-likelihoods come back as float64 on
    the device of ``x``. Evaluation runs under ``torch.no_grad`` with the flow in eval mode.
    """

    def __init__(self, flow: torch.nn.Module, prior=None, label_temperature: float = 1.0,
                 base_temperature: float = 1.0):
        k = int(getattr(flow, "num_classes", 0) or 0)
        if k < 1:
            raise WorldError(
                f"{type(flow).__name__} has num_classes={k}; a FlowWorld needs a class-conditional "
                "flow (num_classes >= 1) or PerClassFlows"
            )
        if prior is not None:
            n_prior = len(prior) if not isinstance(prior, Tensor) else prior.numel()
            if n_prior != k:
                raise WorldError(
                    f"prior has {n_prior} entries but the flow has num_classes={k}; "
                    "checkpoint/prior class mismatch"
                )
        super().__init__(k, prior, label_temperature, base_temperature)
        self.flow = flow.eval()
        if hasattr(flow, "event_shape"):
            self.event_shape = tuple(int(v) for v in flow.event_shape)
        else:  # a TarFlow-like module without the property
            s = flow.img_size
            hw = (int(s), int(s)) if not isinstance(s, (tuple, list)) else tuple(int(v) for v in s)
            self.event_shape = (int(flow.in_channels), *hw)
        self._has_classes = hasattr(flow, "log_prob_classes")
        if self._has_classes:
            import inspect

            params = inspect.signature(flow.log_prob_classes).parameters
            self._classes_takes_tau = "base_temperature" in params
            if not self._classes_takes_tau and self.base_temperature != 1.0:
                # a log_prob_classes without base_temperature evaluates at tau = 1: wrong density
                self._has_classes = False

    @property
    def device(self) -> torch.device:
        if hasattr(self.flow, "device"):
            return torch.device(self.flow.device)
        p = next(self.flow.parameters(), None)
        return p.device if p is not None else torch.device("cpu")

    @property
    def dtype(self) -> torch.dtype:
        if hasattr(self.flow, "dtype"):
            return self.flow.dtype
        p = next(self.flow.parameters(), None)
        return p.dtype if p is not None else torch.float32

    @torch.no_grad()
    def _log_likelihood_classes(self, x: Tensor, classes: Tensor) -> Tensor:
        xf = x.to(self.device, self.dtype)
        c = classes.to(self.device)
        if self._has_classes:
            if self._classes_takes_tau:
                ll = self.flow.log_prob_classes(xf, c, base_temperature=self.base_temperature)
            else:
                ll = self.flow.log_prob_classes(xf, c)
        else:
            cols = []
            for k in c.tolist():
                yk = torch.full((xf.shape[0],), k, dtype=torch.long, device=self.device)
                cols.append(self.flow.log_prob(xf, yk, base_temperature=self.base_temperature))
            ll = torch.stack(cols, dim=1)
        return ll.to(torch.float64).to(x.device)

    @torch.no_grad()
    def _sample_class(self, y: Tensor, generator: torch.Generator | None) -> Tensor:
        # the flow draws its latent on the generator's device, so a seed gives the same
        # samples on any device (oracle.flows.draw_noise)
        return self.flow.sample(y.to(self.device), base_temperature=self.base_temperature,
                                generator=generator)

    def fingerprint(self) -> str:
        h = hashlib.sha256(f"FlowWorld/{type(self.flow).__name__}/v1".encode())
        for name, t in sorted(self.flow.state_dict().items()):
            h.update(name.encode())
            h.update(str(tuple(t.shape)).encode())
            h.update(t.detach().to("cpu").contiguous().view(torch.uint8).numpy().tobytes()
                     if t.numel() else b"")
        return h.hexdigest()


# --------------------------------------------------------------------------------------------
# invertible affine images of a world (Prop. 1 of Theisen et al.: posteriors are invariant)


class AffineWorld(World):
    """The image of ``world`` under the invertible affine map ``x' = A vec(x) + b``.

    ``log p'(x'|y) = log p(A^{-1}(x' - b) | y) - log|det A|``, so posteriors (and hence the
    Bayes error, aleatoric floor, ...) equal those of ``world`` at the pre-image. Prior and
    temperatures are those of ``world``. ``A`` is [D, D] with ``D = prod(event_shape)``;
    computation is float64.
    """

    def __init__(self, world: World, A, b=None):
        self.base = world
        shape = tuple(world.event_shape)
        D = int(np.prod(shape))
        A = torch.as_tensor(np.asarray(A.detach().cpu() if isinstance(A, Tensor) else A, dtype=np.float64))
        if tuple(A.shape) != (D, D):
            raise WorldError(f"A has shape {tuple(A.shape)}; expected [{D}, {D}] for event_shape {shape}")
        b = torch.zeros(D, dtype=torch.float64) if b is None else torch.as_tensor(
            np.asarray(b.detach().cpu() if isinstance(b, Tensor) else b, dtype=np.float64))
        if tuple(b.shape) != (D,):
            raise WorldError(f"b has shape {tuple(b.shape)}; expected [{D}]")
        if not (bool(torch.isfinite(A).all()) and bool(torch.isfinite(b).all())):
            raise WorldError("A or b contains a non-finite value")
        sign, logabsdet = torch.linalg.slogdet(A)
        cond = float(torch.linalg.cond(A))
        if float(sign) == 0.0 or not math.isfinite(cond) or cond > 1e12:
            raise WorldError(f"A is singular or ill-conditioned (condition number {cond:.3g}); expected an invertible map")
        self.A, self.b = A, b
        self.log_abs_det = float(logabsdet)
        self.num_classes = world.num_classes
        self.prior = world.prior
        self.label_temperature = world.label_temperature
        self.base_temperature = world.base_temperature
        self.event_shape = shape

    def inverse(self, x: Tensor) -> Tensor:
        """The pre-image ``A^{-1}(x' - b)``: Tensor[n, *event_shape] float64."""
        flat = x.to("cpu", torch.float64).reshape(x.shape[0], -1)
        pre = torch.linalg.solve(self.A, (flat - self.b).T).T
        return pre.reshape(x.shape[0], *self.event_shape)

    def forward(self, x: Tensor) -> Tensor:
        """``A vec(x) + b``: Tensor[n, *event_shape] float64."""
        flat = x.to("cpu", torch.float64).reshape(x.shape[0], -1)
        return (flat @ self.A.T + self.b).reshape(x.shape[0], *self.event_shape)

    def _log_likelihood_classes(self, x: Tensor, classes: Tensor) -> Tensor:
        ll = self.base.log_likelihood_classes(self.inverse(x), classes)
        return (ll - self.log_abs_det).to(x.device)

    def _sample_class(self, y: Tensor, generator: torch.Generator | None) -> Tensor:
        return self.forward(self.base.sample_class(y, generator))

    def fingerprint(self) -> str:
        h = hashlib.sha256(b"AffineWorld/v1")
        h.update(self.base.fingerprint().encode())
        h.update(self.A.numpy().tobytes())
        h.update(self.b.numpy().tobytes())
        return h.hexdigest()

    def bayes_error(self) -> float:
        """The Bayes error of the base world (invariant under invertible maps)."""
        if not hasattr(self.base, "bayes_error"):
            raise WorldError(f"{type(self.base).__name__} has no closed-form Bayes error")
        return self.base.bayes_error()


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
    from pathlib import Path

    from oracle.errors import DataError

    p = Path(path)
    if not p.is_file():
        raise DataError(f"world file {p} does not exist")
    try:
        # mmap: peeking at the format of a large flow file costs no memory
        return torch.load(p, map_location="cpu", weights_only=True, mmap=True)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure is a bad file
        raise DataError(f"world file {p} is unreadable: {type(exc).__name__}: {exc}") from None


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


def world_from_checkpoint(path, prior=None, label_temperature: float = 1.0,
                          base_temperature: float = 1.0, map_location="cpu") -> FlowWorld | GaussianWorld:
    """The world saved at ``path``, with this prior and these temperatures.

    A file of ``oracle.flows.save_flow`` gives a :class:`FlowWorld` (on ``map_location``); one
    of :func:`save_gaussian_world` a :class:`GaussianWorld` (computed on CPU in float64). The
    workflow's oracle stage writes either, and everything downstream loads it here.

    Raises WorldError when ``prior`` does not have one entry per class of the file, DataError
    for a missing, unreadable or unknown file.
    """
    from oracle.errors import DataError
    from oracle.flows import FLOW_FORMAT, load_flow

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
