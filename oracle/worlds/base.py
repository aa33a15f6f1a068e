"""The interface every world keeps (`World`), the prior and finiteness checks they share."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from oracle.errors import WorldError

PRIOR_TOLERANCE = 1e-6



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
