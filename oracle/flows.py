"""TarFlow: a transformer autoregressive normalizing flow, compatible with the public release.

The module layout (parameter names, shapes, buffers) follows the public TarFlow release
(Zhai et al. 2025, apple/ml-tarflow, `transformer_flow.Model`), so
`TarFlow(...).load_state_dict(public_state_dict, strict=True)` works on its checkpoints:

    blocks.{i}.proj_in                         Linear(C*p*p -> channels)
    blocks.{i}.pos_embed                       [T, channels]
    blocks.{i}.class_embed                     [K, 1, channels]        (only when K > 0)
    blocks.{i}.attn_blocks.{j}.attention.norm  LayerNorm(channels)
    blocks.{i}.attn_blocks.{j}.attention.qkv   Linear(channels -> 3*channels), out = [3, heads, head_dim]
    blocks.{i}.attn_blocks.{j}.attention.proj  Linear(channels -> channels)
    blocks.{i}.attn_blocks.{j}.mlp.norm        LayerNorm(channels)
    blocks.{i}.attn_blocks.{j}.mlp.main.0 / .2 Linear(channels -> e*channels), GELU, Linear(back)
    blocks.{i}.proj_out                        Linear(channels -> 2*C*p*p) (nvp) or C*p*p
    blocks.{i}.attn_mask                       buffer [T, T], lower-triangular ones
    var                                        buffer [T, C*p*p], prior variance (ones in nvp mode)

The blocks live in `oracle.flow_blocks`; building, saving, loading and importing flows in
`oracle.flow_checkpoints`.

Conventions: images are float `[n, C, H, W]` in model space ([-1, 1] plus dequantization
noise). Patches are `unfold(x, p, stride=p)`: T = (H/p)(W/p) tokens in row-major order, each
with C*p*p features ordered (channel, row, column). Densities are in nats per image.

Where this module deliberately differs from the release (and why):
- `log_prob` returns the *full* density: Gaussian base over all D = C*H*W dims plus the
  sum (not the per-dim mean) of every log|det J|, accumulated in float64.
- A label of -1 means "dropped" and uses the mean class embedding in both directions
  (the release's sampler would index the last class with -1).
- Sampling and density evaluation run with autocast disabled, at the parameters' dtype,
  so the flow that generates x is the flow that scores x.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from oracle.errors import ConfigError, DataError, OracleError
from oracle.flow_blocks import MetaBlock

__all__ = ["TarFlow", "PerClassFlows"]

_LOG_2PI = math.log(2.0 * math.pi)


def _draw_eps(n: int, shape: tuple[int, int], generator: torch.Generator | None,
              device: torch.device, dtype: torch.dtype) -> Tensor:
    """eps ~ N(0, I) of shape [n, *shape], drawn in float32 on the generator's device (the
    model's device without a generator), then moved/cast: one seed, one latent, any device."""
    dev = generator.device if generator is not None else device
    eps = torch.randn(n, *shape, generator=generator, device=dev, dtype=torch.float32)
    return eps.to(device=device, dtype=dtype)


def _autocast_off(device: torch.device):
    """Disable any caller's autocast: exact densities are computed at the parameter dtype."""
    return torch.autocast(device_type=device.type, enabled=False)


def _autocast(device: torch.device, dtype: torch.dtype | None):
    """Autocast to `dtype` when one is given (a precision mode asked for it), else off."""
    if dtype is None:
        return _autocast_off(device)
    return torch.autocast(device_type=device.type, dtype=dtype)


# --------------------------------------------------------------------------------------------
# The flow
# --------------------------------------------------------------------------------------------


def _as_hw(img_size: int | tuple[int, int] | list[int]) -> tuple[int, int]:
    if isinstance(img_size, int):
        return img_size, img_size
    hw = tuple(int(s) for s in img_size)
    if len(hw) != 2:
        raise ConfigError(f"img_size={img_size!r}: expected an int or an (H, W) pair")
    return hw  # type: ignore[return-value]


class TarFlow(nn.Module):
    """Class-conditional (num_classes > 0) or unconditional TarFlow.

    Args:
        in_channels: image channels C.
        img_size: H = W (int, the public layout) or an (H, W) pair.
        patch_size: p; H and W must be multiples of p.
        channels: transformer width; a multiple of head_dim.
        num_blocks: flow blocks; even blocks keep token order, odd blocks flip it.
        layers_per_block: transformer layers per block.
        num_classes: K class embeddings; 0 for an unconditional flow.
        nvp: affine (True) or volume-preserving shift-only (False) blocks.
        head_dim, expansion: attention head size and MLP expansion (release: 64 and 4).
    """

    var: Tensor

    def __init__(
        self,
        in_channels: int,
        img_size: int | tuple[int, int],
        patch_size: int,
        channels: int,
        num_blocks: int,
        layers_per_block: int,
        num_classes: int = 0,
        nvp: bool = True,
        head_dim: int = 64,
        expansion: int = 4,
    ):
        super().__init__()
        h, w = _as_hw(img_size)
        for name, value in [("in_channels", in_channels), ("patch_size", patch_size),
                            ("channels", channels), ("num_blocks", num_blocks),
                            ("layers_per_block", layers_per_block), ("head_dim", head_dim),
                            ("expansion", expansion), ("img_size", min(h, w))]:
            if int(value) < 1:
                raise ConfigError(f"{name}={value!r}: expected a positive integer")
        if num_classes < 0:
            raise ConfigError(f"num_classes={num_classes!r}: expected >= 0")
        if h % patch_size or w % patch_size:
            raise ConfigError(f"img_size={img_size!r} is not a multiple of patch_size={patch_size}")
        self.in_channels = int(in_channels)
        self.img_size = img_size if isinstance(img_size, int) else (h, w)
        self.height, self.width = h, w
        self.patch_size = int(patch_size)
        self.num_classes = int(num_classes)
        self.nvp = bool(nvp)
        self.num_patches = (h // patch_size) * (w // patch_size)
        self.patch_features = in_channels * patch_size**2
        self.blocks = nn.ModuleList(
            [
                MetaBlock(self.patch_features, channels, self.num_patches, bool(i % 2),
                          layers_per_block, head_dim, expansion, nvp, num_classes)
                for i in range(num_blocks)
            ]
        )
        # The release keeps the prior variance as a buffer: ones in nvp mode; the
        # volume-preserving variant learns it by running averages (see flow_training).
        self.register_buffer("var", torch.ones(self.num_patches, self.patch_features))

    # -- shapes ---------------------------------------------------------------------------
    @property
    def event_shape(self) -> tuple[int, int, int]:
        return (self.in_channels, self.height, self.width)

    @property
    def noise_shape(self) -> tuple[int, int]:
        """Shape of one image's latent in token form: (T, C*p*p)."""
        return (self.num_patches, self.patch_features)

    @property
    def dims(self) -> int:
        """D = C*H*W, the dimension the density is over."""
        return self.in_channels * self.height * self.width

    @property
    def dtype(self) -> torch.dtype:
        return self.var.dtype

    @property
    def device(self) -> torch.device:
        return self.var.device

    def patchify(self, x: Tensor) -> Tensor:
        """[n, C, H, W] -> [n, T, C*p*p], the token layout of F.unfold(x, p, stride=p)."""
        n, c, h, w = x.shape
        p = self.patch_size
        x = x.reshape(n, c, h // p, p, w // p, p).permute(0, 2, 4, 1, 3, 5)
        return x.reshape(n, self.num_patches, self.patch_features)

    def unpatchify(self, x: Tensor) -> Tensor:
        """Inverse of `patchify`: [n, T, C*p*p] -> [n, C, H, W]."""
        n = x.shape[0]
        p, c = self.patch_size, self.in_channels
        x = x.reshape(n, self.height // p, self.width // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
        return x.reshape(n, c, self.height, self.width)

    # -- input checks ---------------------------------------------------------------------
    def _check_x(self, x: Tensor) -> None:
        if x.dim() != 4 or tuple(x.shape[1:]) != self.event_shape:
            raise DataError(f"x has shape {tuple(x.shape)}; expected [n, {', '.join(map(str, self.event_shape))}]")

    def _check_y(self, y: Tensor | None, n: int) -> Tensor | None:
        if y is None:
            return None
        y = torch.as_tensor(y, device=self.device).long().reshape(-1)
        if y.numel() != n:
            raise DataError(f"y has {y.numel()} labels for {n} images")
        if self.num_classes == 0:
            if bool((y >= 0).any()):
                raise OracleError("labels given to an unconditional TarFlow (num_classes=0); pass y=None")
            return None
        if n and (int(y.min()) < -1 or int(y.max()) >= self.num_classes):
            raise DataError(f"labels must lie in [-1, {self.num_classes - 1}]; got [{int(y.min())}, {int(y.max())}]")
        return y

    @staticmethod
    def _check_temperature(base_temperature: float) -> float:
        tau = float(base_temperature)
        if not (tau > 0 and math.isfinite(tau)):
            raise OracleError(f"base_temperature={base_temperature!r}: expected a finite number > 0")
        return tau

    # -- forward / density ----------------------------------------------------------------
    def _transform(self, x: Tensor, y: Tensor | None) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        tokens = self.patchify(x)
        outputs, shifts = [], []
        for block in self.blocks:
            tokens, a = block(tokens, y)
            outputs.append(tokens)
            shifts.append(a)
        return tokens, outputs, shifts

    def forward(self, x: Tensor, y: Tensor | None = None) -> tuple[Tensor, list[Tensor], Tensor]:
        """The training direction, as in the release.

        Args: x [n, C, H, W]; y LongTensor[n] (-1 = dropped label) or None.
        Returns: z [n, T, C*p*p]; the per-block outputs (same shape); logdets [n], the sum over
        blocks of the per-dimension mean log|det| (the training-loss convention, D times
        smaller than the full log-determinant).
        """
        z, outputs, shifts = self._transform(x, y)
        logdets = torch.zeros((), device=x.device)
        for a in shifts:
            logdets = logdets - a.mean(dim=(1, 2))
        return z, outputs, logdets

    @staticmethod
    def loss(z: Tensor, logdets: Tensor) -> Tensor:
        """Release training loss, nats/dim without the constant 0.5*log(2*pi)."""
        return 0.5 * z.float().pow(2).mean() - logdets.float().mean()

    def _base_log_prob(self, z: Tensor, tau: float) -> Tensor:
        var = self.var.double() * tau**2
        z = z.double()
        return -0.5 * (z.pow(2) / var).sum(dim=(1, 2)) - 0.5 * (torch.log(var) + _LOG_2PI).sum()

    def log_prob(self, x: Tensor, y: Tensor | None = None, base_temperature: float = 1.0,
                 autocast_dtype: torch.dtype | None = None) -> Tensor:
        """Exact log density log p(x | y) in nats per image, float64 [n].

        log N(z; 0, tau^2 var) over all D dims + sum over blocks of log|det dz/dx|, with the
        sums accumulated in float64. x is cast to the parameter dtype; a caller's autocast is
        disabled, unless `autocast_dtype` (e.g. torch.bfloat16, `oracle.float_precision`) asks for
        one: then the network runs under it and only the sums stay float64.
        y=None (or -1 entries) uses the mean class embedding of a conditional flow.
        """
        self._check_x(x)
        tau = self._check_temperature(base_temperature)
        y = self._check_y(y, x.shape[0])
        with _autocast(self.device, autocast_dtype):
            z, _, shifts = self._transform(x.to(device=self.device, dtype=self.dtype), y)
            logdet = torch.zeros(x.shape[0], dtype=torch.float64, device=self.device)
            for a in shifts:
                logdet = logdet - a.double().sum(dim=(1, 2))
            return self._base_log_prob(z, tau) + logdet

    def log_prob_classes(
        self,
        x: Tensor,
        classes: Tensor,
        base_temperature: float = 1.0,
        max_rows: int | None = None,
        autocast_dtype: torch.dtype | None = None,
    ) -> Tensor:
        """log p(x_i | y = classes_j) for every pair, float64 [n, k], nats per image
        (`autocast_dtype` as in `log_prob`).

        Expands to n*k rows (row i*k + j) and evaluates them in one forward pass, or in
        chunks of `max_rows` rows to bound memory (rows are gathered per chunk, so the
        n*k expansion is never materialized as a whole).
        """
        if self.num_classes == 0:
            raise OracleError("log_prob_classes needs a class-conditional TarFlow (num_classes > 0)")
        self._check_x(x)
        classes = torch.as_tensor(classes).long().reshape(-1)
        n, k = x.shape[0], classes.numel()
        out = torch.empty(n * k, dtype=torch.float64, device=self.device)
        step = max_rows or max(n * k, 1)
        for s in range(0, n * k, step):
            rows = torch.arange(s, min(s + step, n * k))
            out[rows.to(self.device)] = self.log_prob(
                x[rows.div(k, rounding_mode="floor").to(x.device)],
                classes[rows % k], base_temperature, autocast_dtype)
        return out.reshape(n, k)

    # -- sampling -------------------------------------------------------------------------
    def draw_noise(self, n: int, base_temperature: float = 1.0, generator: torch.Generator | None = None) -> Tensor:
        """The latent of `sample`: z = tau * sqrt(var) * eps, [n, T, C*p*p] at the model dtype.

        eps = torch.randn(n, T, C*p*p, dtype=float32, generator=generator) on the generator's
        device, then cast: a seed gives the same latent on any device and for float32 or
        float64 models.
        """
        tau = self._check_temperature(base_temperature)
        eps = _draw_eps(int(n), self.noise_shape, generator, self.device, self.dtype)
        return eps * (tau * self.var.sqrt())

    @torch.no_grad()
    def reverse(self, z: Tensor, y: Tensor | None = None, guidance: float = 0.0, use_cache: bool = True) -> Tensor:
        """Latent tokens z [n, T, C*p*p] -> image [n, C, H, W] (the exact inverse when guidance=0)."""
        y = self._check_y(y, z.shape[0])
        if guidance and self.num_classes == 0:
            raise OracleError("guidance needs a class-conditional TarFlow")
        with _autocast_off(self.device):
            x = z.to(device=self.device, dtype=self.dtype)
            for block in reversed(self.blocks):
                x = block.reverse(x, y, float(guidance), use_cache)
        return self.unpatchify(x)

    @torch.no_grad()
    def sample(
        self,
        y: Tensor | None,
        base_temperature: float = 1.0,
        generator: torch.Generator | None = None,
        n: int | None = None,
        guidance: float = 0.0,
        use_cache: bool = True,
    ) -> Tensor:
        """Draw x ~ p(x | y) at base temperature tau: [n, C, H, W] at the parameter dtype.

        y: LongTensor[n] (-1 = mean class embedding) or None (then `n` is required).
        The latent is `draw_noise(n, tau, generator)`; inversion is autoregressive with a
        key/value cache per attention layer.
        guidance: classifier-free guidance weight for pictures only. With guidance != 0 the
        samples do NOT follow the flow's density; never use them as oracle data.
        """
        if y is None:
            if n is None:
                raise OracleError("sample(y=None) needs n, the number of samples")
        else:
            y = torch.as_tensor(y).reshape(-1)
            if n is not None and n != y.numel():
                raise OracleError(f"sample got n={n} but {y.numel()} labels")
            n = y.numel()
        z = self.draw_noise(int(n), base_temperature, generator)
        return self.reverse(z, y, guidance, use_cache)


class PerClassFlows(nn.Module):
    """K unconditional flows, one per class ("one flow per class"), behind TarFlow's interface.

    Parameters live under `flows.{k}.` (each a TarFlow with num_classes=0).
    """

    def __init__(self, flows: list[TarFlow]):
        super().__init__()
        if not flows:
            raise ConfigError("PerClassFlows needs at least one flow")
        shapes = {(f.event_shape, f.noise_shape) for f in flows}
        if len(shapes) != 1 or any(f.num_classes for f in flows):
            raise ConfigError("PerClassFlows needs unconditional flows with one event shape")
        self.flows = nn.ModuleList(flows)

    @property
    def num_classes(self) -> int:
        return len(self.flows)

    @property
    def event_shape(self) -> tuple[int, int, int]:
        return self.flows[0].event_shape

    @property
    def noise_shape(self) -> tuple[int, int]:
        return self.flows[0].noise_shape

    @property
    def dims(self) -> int:
        return self.flows[0].dims

    @property
    def dtype(self) -> torch.dtype:
        return self.flows[0].dtype

    @property
    def device(self) -> torch.device:
        return self.flows[0].device

    def _check_y(self, y: Tensor, n: int) -> Tensor:
        if y is None:
            raise OracleError("PerClassFlows needs a class label for every row (y=None given)")
        y = torch.as_tensor(y, device=self.device).long().reshape(-1)
        if y.numel() != n:
            raise DataError(f"y has {y.numel()} labels for {n} rows")
        if n and (int(y.min()) < 0 or int(y.max()) >= self.num_classes):
            raise DataError(f"labels must lie in [0, {self.num_classes - 1}]; got [{int(y.min())}, {int(y.max())}]")
        return y

    def log_prob(self, x: Tensor, y: Tensor, base_temperature: float = 1.0,
                 autocast_dtype: torch.dtype | None = None) -> Tensor:
        """log p(x | y) with flow y of each row: float64 [n], nats per image."""
        y = self._check_y(y, x.shape[0])
        out = torch.empty(x.shape[0], dtype=torch.float64, device=self.device)
        for k in torch.unique(y).tolist():
            rows = y == k
            out[rows] = self.flows[k].log_prob(x[rows], None, base_temperature, autocast_dtype)
        return out

    def log_prob_classes(self, x: Tensor, classes: Tensor, base_temperature: float = 1.0,
                         max_rows: int | None = None, autocast_dtype: torch.dtype | None = None) -> Tensor:
        """float64 [n, k]: column j is flow classes[j] on every image (one pass per class,
        in chunks of `max_rows` images)."""
        classes = torch.as_tensor(classes).reshape(-1)
        classes = self._check_y(classes, classes.numel())
        n = x.shape[0]
        step = max_rows or max(n, 1)
        out = torch.empty(n, classes.numel(), dtype=torch.float64, device=self.device)
        for j, k in enumerate(classes.tolist()):
            for s in range(0, n, step):
                out[s : s + step, j] = self.flows[k].log_prob(x[s : s + step], None, base_temperature,
                                                              autocast_dtype)
        return out

    @torch.no_grad()
    def sample(self, y: Tensor, base_temperature: float = 1.0, generator: torch.Generator | None = None,
               n: int | None = None, use_cache: bool = True) -> Tensor:
        """x[i] ~ p(x | y_i) with flow y_i. All latents are drawn first (same convention as
        TarFlow.draw_noise for the whole batch), so a row's sample does not depend on how the
        other rows are grouped by class."""
        if y is None:
            raise OracleError("PerClassFlows.sample needs labels y")
        y = self._check_y(y, torch.as_tensor(y).numel())
        if n is not None and n != y.numel():
            raise OracleError(f"sample got n={n} but {y.numel()} labels")
        tau = TarFlow._check_temperature(base_temperature)
        eps = _draw_eps(y.numel(), self.noise_shape, generator, self.device, self.dtype)
        out = torch.empty(y.numel(), *self.event_shape, dtype=self.dtype, device=self.device)
        for k in torch.unique(y).tolist():
            rows = y == k
            flow = self.flows[k]
            out[rows] = flow.reverse(eps[rows] * (tau * flow.var.sqrt()), None, 0.0, use_cache)
        return out
