"""Flow worlds: a frozen normalizing flow (`FlowWorld`), and the affine image of any world
(`AffineWorld`, which leaves every posterior unchanged: the Bayes error is invariant under
invertible maps)."""

from __future__ import annotations

import contextlib
import copy
import hashlib
import inspect
import math
from collections.abc import Iterator

import numpy as np
import torch
from torch import Tensor

from oracle.errors import WorldError

from oracle.worlds.base import World


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

    ``precision`` is the mode log-likelihoods are scored in (`oracle.float_precision`: float64,
    float32, tf32, bf16; default the flow's own dtype); samples are always drawn at the flow's
    dtype. float64 scores with a float64 copy of the flow, made on first use.
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
        self._flow64: torch.nn.Module | None = None
        self.precision = "float64" if self.dtype == torch.float64 else "float32"
        if hasattr(flow, "event_shape"):
            self.event_shape = tuple(int(v) for v in flow.event_shape)
        else:  # a TarFlow-like module without the property
            s = flow.img_size
            hw = (int(s), int(s)) if not isinstance(s, (tuple, list)) else tuple(int(v) for v in s)
            self.event_shape = (int(flow.in_channels), *hw)
        self._has_classes = hasattr(flow, "log_prob_classes")
        if self._has_classes:
            params = inspect.signature(flow.log_prob_classes).parameters
            self._classes_takes_tau = "base_temperature" in params
            self._classes_takes_autocast = "autocast_dtype" in params
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

    @property
    def precision(self) -> str:
        """The precision mode log-likelihoods are scored in (`oracle.float_precision`)."""
        return self._precision

    @precision.setter
    def precision(self, mode: str) -> None:
        from oracle.float_precision import check_mode

        self._precision = check_mode(mode, self.device)

    @contextlib.contextmanager
    def scoring(self, mode: str) -> Iterator[None]:
        """Score in precision `mode` inside the block; the world's own mode is restored after."""
        before = self.precision
        self.precision = mode
        try:
            yield
        finally:
            self._precision = before

    def _scoring_flow(self) -> torch.nn.Module:
        if self.precision != "float64" or self.dtype == torch.float64:
            return self.flow
        if self._flow64 is None:
            self._flow64 = copy.deepcopy(self.flow).to(torch.float64).eval()
        return self._flow64

    @torch.no_grad()
    def _log_likelihood_classes(self, x: Tensor, classes: Tensor) -> Tensor:
        from oracle.float_precision import autocast_dtype, matmul_precision

        flow = self._scoring_flow()
        xf = x.to(self.device, torch.float64 if flow is not self.flow else self.dtype)
        c = classes.to(self.device)
        extra = {}
        if (cast := autocast_dtype(self.precision)) is not None:
            takes = self._classes_takes_autocast if self._has_classes else \
                "autocast_dtype" in inspect.signature(flow.log_prob).parameters
            if not takes:
                raise WorldError(f"precision {self.precision!r}: {type(flow).__name__} takes no autocast_dtype")
            extra["autocast_dtype"] = cast
        with matmul_precision(self.precision, self.device):
            if self._has_classes:
                if self._classes_takes_tau:
                    ll = flow.log_prob_classes(xf, c, base_temperature=self.base_temperature, **extra)
                else:
                    ll = flow.log_prob_classes(xf, c, **extra)
            else:
                cols = []
                for k in c.tolist():
                    yk = torch.full((xf.shape[0],), k, dtype=torch.long, device=self.device)
                    cols.append(flow.log_prob(xf, yk, base_temperature=self.base_temperature, **extra))
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
