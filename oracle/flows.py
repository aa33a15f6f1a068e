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
import os
import re
from collections.abc import Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from oracle.io.atomic import torch_save_atomic
from oracle.errors import ConfigError, DataError, OracleError, WorldError

__all__ = [
    "TarFlow",
    "PerClassFlows",
    "MetaBlock",
    "build_flow",
    "save_flow",
    "load_flow",
    "load_public_tarflow",
    "FLOW_FORMAT",
]

FLOW_FORMAT = "oracle-flow"
FLOW_FORMAT_VERSION = 1
_LOG_2PI = math.log(2.0 * math.pi)


def _up(t: Tensor) -> Tensor:
    """Half precision -> float32 (the release's `.float()`), leaving float32/float64 alone so
    a float64 model stays float64 throughout."""
    return t.float() if t.dtype in (torch.float16, torch.bfloat16) else t


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


# --------------------------------------------------------------------------------------------
# Transformer pieces (names follow the release so state dicts line up)
# --------------------------------------------------------------------------------------------


class _KVCache:
    """Preallocated keys/values of one attention layer: [B, heads, T, head_dim] each."""

    def __init__(self, batch: int, heads: int, length: int, head_dim: int, like: Tensor):
        self.k = like.new_zeros(batch, heads, length, head_dim)
        self.v = like.new_zeros(batch, heads, length, head_dim)
        self.length = 0


class Attention(nn.Module):
    """Pre-norm multi-head causal self-attention; qkv output laid out as [3, heads, head_dim]."""

    def __init__(self, channels: int, head_dim: int):
        super().__init__()
        if channels % head_dim:
            raise ConfigError(f"channels={channels} must be a multiple of head_dim={head_dim}")
        self.norm = nn.LayerNorm(channels)
        self.qkv = nn.Linear(channels, 3 * channels)
        self.proj = nn.Linear(channels, channels)
        self.num_heads = channels // head_dim
        self.head_dim = head_dim
        # The release computes head_dim**-0.25 squared; keep the same float for bitwise parity.
        self.scale = (head_dim**-0.25) ** 2

    def forward(self, x: Tensor, mask: Tensor | None = None, cache: _KVCache | None = None) -> Tensor:
        """x: [B, T, C]. With `cache`, x holds the next T tokens and attends to all cached ones."""
        b, t, c = x.shape
        h = self.norm(_up(x)).type(x.dtype)  # LayerNorm in (at least) float32, as in the release
        q, k, v = self.qkv(h).reshape(b, t, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        if cache is not None:
            start, stop = cache.length, cache.length + t
            cache.k[:, :, start:stop] = k
            cache.v[:, :, start:stop] = v
            cache.length = stop
            k, v = cache.k[:, :, :stop], cache.v[:, :, :stop]
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=self.scale)
        return self.proj(out.transpose(1, 2).reshape(b, t, c))


class MLP(nn.Module):
    """Pre-norm feed-forward: LayerNorm -> Linear -> exact GELU -> Linear."""

    def __init__(self, channels: int, expansion: int):
        super().__init__()
        self.norm = nn.LayerNorm(channels)
        self.main = nn.Sequential(
            nn.Linear(channels, channels * expansion),
            nn.GELU(),
            nn.Linear(channels * expansion, channels),
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.main(self.norm(_up(x)).type(x.dtype))


class AttentionBlock(nn.Module):
    """One residual layer: x + attention(x), then x + mlp(x)."""

    def __init__(self, channels: int, head_dim: int, expansion: int):
        super().__init__()
        self.attention = Attention(channels, head_dim)
        self.mlp = MLP(channels, expansion)

    def forward(self, x: Tensor, mask: Tensor | None = None, cache: _KVCache | None = None) -> Tensor:
        x = x + self.attention(x, mask, cache)
        return x + self.mlp(x)


class MetaBlock(nn.Module):
    """One autoregressive affine flow step over a token sequence.

    In the block's own token order (identity, or flipped for odd blocks), token t is
    transformed as z_t = (x_t - b_t) * exp(-a_t), where (a_t, b_t) are computed by a causal
    transformer from tokens < t (the network output is shifted by one; token 0 gets a = b = 0).
    """

    attn_mask: Tensor

    def __init__(
        self,
        in_features: int,
        channels: int,
        num_patches: int,
        flip: bool,
        num_layers: int,
        head_dim: int = 64,
        expansion: int = 4,
        nvp: bool = True,
        num_classes: int = 0,
    ):
        super().__init__()
        self.in_features = in_features
        self.flip = flip
        self.nvp = nvp
        self.proj_in = nn.Linear(in_features, channels)
        self.pos_embed = nn.Parameter(torch.randn(num_patches, channels) * 1e-2)
        if num_classes:
            self.class_embed = nn.Parameter(torch.randn(num_classes, 1, channels) * 1e-2)
        else:
            self.class_embed = None
        self.attn_blocks = nn.ModuleList(
            [AttentionBlock(channels, head_dim, expansion) for _ in range(num_layers)]
        )
        self.proj_out = nn.Linear(channels, 2 * in_features if nvp else in_features)
        with torch.no_grad():
            self.proj_out.weight.zero_()  # starts as the identity map (bias stays default)
        self.register_buffer("attn_mask", torch.tril(torch.ones(num_patches, num_patches)))

    # -- helpers --------------------------------------------------------------------------
    def permute(self, x: Tensor, dim: int = 1) -> Tensor:
        """The block's token order; a flip is its own inverse."""
        return x.flip(dims=[dim]) if self.flip else x

    def class_term(self, y: Tensor | None) -> Tensor | None:
        """Class embedding to add to every token: [n, 1, C], [1, C] (mean) or None.

        y=None or a label of -1 gives the mean class embedding ("dropped label").
        """
        if self.class_embed is None:
            return None
        mean = self.class_embed.mean(dim=0)
        if y is None:
            return mean
        dropped = (y < 0).view(-1, 1, 1)
        return torch.where(dropped, mean, self.class_embed[y.clamp(min=0)])

    def _split(self, out: Tensor) -> tuple[Tensor, Tensor]:
        if self.nvp:
            a, b = out.chunk(2, dim=-1)
            return a, b
        return torch.zeros_like(out), out

    def affine_params(self, x: Tensor, y: Tensor | None) -> tuple[Tensor, Tensor]:
        """(a, b) for every token of `x` (already in block order), each [n, T, C*p*p].

        Row t depends only on x[:, :t]; row 0 is zero.
        """
        h = self.proj_in(x) + self.permute(self.pos_embed, dim=0)
        cls = self.class_term(y)
        if cls is not None:
            h = h + cls
        mask = self.attn_mask.bool()
        for layer in self.attn_blocks:
            h = layer(h, mask)
        out = self.proj_out(h)
        out = torch.cat([torch.zeros_like(out[:, :1]), out[:, :-1]], dim=1)
        return self._split(out)

    # -- directions -----------------------------------------------------------------------
    def forward(self, x: Tensor, y: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """x: [n, T, F] tokens in model order -> (z [n, T, F], a [n, T, F] in block order).

        log|det dz/dx| per image is -a.sum(dim=(1, 2)).
        """
        x = self.permute(x)
        a, b = self.affine_params(x, y)
        scale = (-_up(a)).exp().type(a.dtype)
        return self.permute((x - b) * scale), a

    def _token_params(
        self, token: Tensor, i: int, pos: Tensor, cls: Tensor | None, caches: list[_KVCache]
    ) -> tuple[Tensor, Tensor]:
        h = self.proj_in(token) + pos[i : i + 1]
        if cls is not None:
            h = h + cls
        for layer, cache in zip(self.attn_blocks, caches):
            h = layer(h, None, cache)  # causality comes from the cache holding tokens <= i only
        return self._split(self.proj_out(h))

    def reverse(
        self, z: Tensor, y: Tensor | None = None, guidance: float = 0.0, use_cache: bool = True
    ) -> Tensor:
        """Invert `forward`: z [n, T, F] -> x [n, T, F], one token at a time.

        `use_cache=False` recomputes the full causal network for every token (O(T^2) work);
        it exists as a reference for the cached path. `guidance` > 0 is classifier-free
        guidance: NOT the inverse of `forward`, for pictures only (see TarFlow.sample).
        """
        z = self.permute(z)
        n, t, _ = z.shape
        x = z.clone()
        if guidance:
            y_u = torch.full((n,), -1, dtype=torch.long, device=z.device)
            y_run = torch.cat([y, y_u]) if y is not None else torch.cat([y_u, y_u])
            rows = 2 * n
        else:
            y_run, rows = y, n

        def combine(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
            if not guidance:
                return a, b
            (a_c, a_u), (b_c, b_u) = a.chunk(2), b.chunk(2)
            return a_c + guidance * (a_c - a_u), b_c + guidance * (b_c - b_u)

        if use_cache:
            caches = [_KVCache(rows, layer.attention.num_heads, t, layer.attention.head_dim, self.pos_embed)
                      for layer in self.attn_blocks]
            pos = self.permute(self.pos_embed, dim=0)
            cls = self.class_term(y_run)
            for i in range(t - 1):
                token = x[:, i : i + 1]
                if guidance:
                    token = torch.cat([token, token])
                a, b = combine(*self._token_params(token, i, pos, cls, caches))
                scale = _up(a[:, 0]).exp().type(a.dtype)
                x[:, i + 1] = z[:, i + 1] * scale + b[:, 0]
        else:
            for i in range(t - 1):
                inp = torch.cat([x, x]) if guidance else x
                a, b = combine(*self.affine_params(inp, y_run))
                scale = _up(a[:, i + 1]).exp().type(a.dtype)
                x[:, i + 1] = z[:, i + 1] * scale + b[:, i + 1]
        return self.permute(x)


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

    def log_prob(self, x: Tensor, y: Tensor | None = None, base_temperature: float = 1.0) -> Tensor:
        """Exact log density log p(x | y) in nats per image, float64 [n].

        log N(z; 0, tau^2 var) over all D dims + sum over blocks of log|det dz/dx|, with the
        sums accumulated in float64. x is cast to the parameter dtype; autocast is disabled.
        y=None (or -1 entries) uses the mean class embedding of a conditional flow.
        """
        self._check_x(x)
        tau = self._check_temperature(base_temperature)
        y = self._check_y(y, x.shape[0])
        with _autocast_off(self.device):
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
    ) -> Tensor:
        """log p(x_i | y = classes_j) for every pair, float64 [n, k], nats per image.

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
                classes[rows % k], base_temperature)
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

    def log_prob(self, x: Tensor, y: Tensor, base_temperature: float = 1.0) -> Tensor:
        """log p(x | y) with flow y of each row: float64 [n], nats per image."""
        y = self._check_y(y, x.shape[0])
        out = torch.empty(x.shape[0], dtype=torch.float64, device=self.device)
        for k in torch.unique(y).tolist():
            rows = y == k
            out[rows] = self.flows[k].log_prob(x[rows], None, base_temperature)
        return out

    def log_prob_classes(self, x: Tensor, classes: Tensor, base_temperature: float = 1.0,
                         max_rows: int | None = None) -> Tensor:
        """float64 [n, k]: column j is flow classes[j] on every image (one pass per class,
        in chunks of `max_rows` images)."""
        classes = torch.as_tensor(classes).reshape(-1)
        classes = self._check_y(classes, classes.numel())
        n = x.shape[0]
        step = max_rows or max(n, 1)
        out = torch.empty(n, classes.numel(), dtype=torch.float64, device=self.device)
        for j, k in enumerate(classes.tolist()):
            for s in range(0, n, step):
                out[s : s + step, j] = self.flows[k].log_prob(x[s : s + step], None, base_temperature)
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


# --------------------------------------------------------------------------------------------
# Specs, files
# --------------------------------------------------------------------------------------------

_REQUIRED = ("in_channels", "img_size", "patch_size", "channels", "num_blocks", "layers_per_block")
_OPTIONAL = {"num_classes": 0, "per_class": False, "nvp": True, "head_dim": 64, "expansion": 4}


def normalize_spec(spec: dict) -> dict:
    """Validate a flow spec and fill defaults. Raises ConfigError naming the key."""
    if not isinstance(spec, dict):
        raise ConfigError(f"flow spec must be a mapping, got {type(spec).__name__}")
    unknown = sorted(set(spec) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        raise ConfigError(f"flow spec: unknown key(s) {unknown}; expected {list(_REQUIRED) + list(_OPTIONAL)}")
    missing = [k for k in _REQUIRED if k not in spec]
    if missing:
        raise ConfigError(f"flow spec: missing key(s) {missing}")
    out = {**_OPTIONAL, **spec}
    img = out["img_size"]
    out["img_size"] = int(img) if isinstance(img, int) else list(_as_hw(img))
    for k in ("in_channels", "patch_size", "channels", "num_blocks", "layers_per_block",
              "num_classes", "head_dim", "expansion"):
        if not isinstance(out[k], int) or isinstance(out[k], bool):
            raise ConfigError(f"flow spec: {k}={out[k]!r}: expected an integer")
    for k in ("per_class", "nvp"):
        if not isinstance(out[k], bool):
            raise ConfigError(f"flow spec: {k}={out[k]!r}: expected true/false")
    if out["per_class"] and out["num_classes"] < 1:
        raise ConfigError("flow spec: per_class=true needs num_classes >= 1")
    return out


def build_flow(spec: dict, seed: int | None = None) -> TarFlow | PerClassFlows:
    """A fresh flow from a spec (keys: in_channels, img_size, patch_size, channels, num_blocks,
    layers_per_block, num_classes=0, per_class=False, nvp=True, head_dim=64, expansion=4).

    `seed` makes the initialisation a function of the seed without touching global RNG state.
    """
    s = normalize_spec(spec)
    img = s["img_size"] if isinstance(s["img_size"], int) else tuple(s["img_size"])
    kw = dict(in_channels=s["in_channels"], img_size=img, patch_size=s["patch_size"],
              channels=s["channels"], num_blocks=s["num_blocks"],
              layers_per_block=s["layers_per_block"], nvp=s["nvp"], head_dim=s["head_dim"],
              expansion=s["expansion"])

    def make() -> TarFlow | PerClassFlows:
        if s["per_class"]:
            return PerClassFlows([TarFlow(num_classes=0, **kw) for _ in range(s["num_classes"])])
        return TarFlow(num_classes=s["num_classes"], **kw)

    if seed is None:
        return make()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        return make()


def _state_mismatch(expected: dict[str, Tensor], got: dict[str, Tensor], limit: int = 6) -> str:
    """One line: missing keys, unexpected keys, shape mismatches ('' when they fit)."""
    missing = [k for k in expected if k not in got]
    unexpected = [k for k in got if k not in expected]
    shapes = [f"{k} file {list(got[k].shape)} vs model {list(expected[k].shape)}"
              for k in expected if k in got and tuple(got[k].shape) != tuple(expected[k].shape)]
    parts = []
    for label, items in (("missing", missing), ("unexpected", unexpected), ("shape mismatch", shapes)):
        if items:
            more = f" (+{len(items) - limit} more)" if len(items) > limit else ""
            parts.append(f"{label}: {', '.join(items[:limit])}{more}")
    return "; ".join(parts)


def save_flow(path: str | os.PathLike, model: nn.Module, spec: dict, extra: dict | None = None) -> None:
    """Write {format, spec, state_dict, extra} to `path` atomically (temp file + rename).

    Raises ConfigError when `spec` does not describe `model` (checked on the meta device).
    """
    s = normalize_spec(spec)
    with torch.device("meta"):
        ref = build_flow(s)
    sd = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    bad = _state_mismatch(ref.state_dict(), sd)
    if bad:
        raise ConfigError(f"save_flow {path}: spec does not describe the model ({bad})")
    torch_save_atomic({"format": FLOW_FORMAT, "format_version": FLOW_FORMAT_VERSION,
                       "spec": s, "state_dict": sd, "extra": extra or {}}, Path(path))


def load_flow(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> tuple[nn.Module, dict]:
    """(model in eval mode, spec) from a file written by `save_flow`."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"flow checkpoint {path} does not exist")
    try:
        blob = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure is a bad file
        raise DataError(f"flow checkpoint {path} is unreadable: {type(exc).__name__}: {exc}") from None
    if not isinstance(blob, dict) or blob.get("format") != FLOW_FORMAT:
        raise DataError(f"{path} is not an oracle flow file (format={FLOW_FORMAT!r}); "
                        "for a public TarFlow state dict use load_public_tarflow")
    spec = normalize_spec(blob["spec"])
    model = build_flow(spec)
    bad = _state_mismatch(model.state_dict(), blob["state_dict"])
    if bad:
        raise OracleError(f"flow checkpoint {path} does not match its spec: {bad}")
    model.load_state_dict(blob["state_dict"], strict=True)
    return model.to(map_location).eval(), spec


def load_public_tarflow(path: str | os.PathLike, spec: dict) -> TarFlow:
    """A public TarFlow release checkpoint (a raw state_dict, possibly wrapped in a dict
    under 'model'/'state_dict'/'ema') loaded strictly into TarFlow(spec), float32, eval mode.

    Raises OracleError naming the file and the mismatching keys/shapes (e.g. another class count).
    """
    path = Path(path)
    s = normalize_spec(spec)
    if s["per_class"]:
        raise ConfigError("load_public_tarflow loads one TarFlow; spec has per_class=true")
    if not path.is_file():
        raise DataError(f"public TarFlow checkpoint {path} does not exist")
    try:
        sd = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001
        raise DataError(f"public TarFlow checkpoint {path} is unreadable: {type(exc).__name__}: {exc}") from None
    for key in ("model", "state_dict", "ema"):
        if isinstance(sd, dict) and isinstance(sd.get(key), dict):
            sd = sd[key]
            break
    if not isinstance(sd, dict) or not all(isinstance(v, Tensor) for v in sd.values()):
        raise DataError(f"public TarFlow checkpoint {path} does not hold a state_dict of tensors")
    for prefix in ("module.", "_orig_mod."):  # DDP / torch.compile wrappers
        if sd and all(k.startswith(prefix) for k in sd):
            sd = {k[len(prefix):]: v for k, v in sd.items()}
    model = build_flow(s)
    bad = _state_mismatch(model.state_dict(), sd)
    if bad:
        raise OracleError(f"public TarFlow checkpoint {path} does not fit the spec "
                          f"(num_classes={s['num_classes']}, img_size={s['img_size']}, "
                          f"patch_size={s['patch_size']}, channels={s['channels']}): {bad}")
    model.load_state_dict(sd, strict=True)
    return model.float().eval()


# --------------------------------------------------------------------------- checkpoint checks


def checkpoint_num_classes(path: str | os.PathLike, fmt: str) -> int:
    """The class count K of a flow checkpoint, without building the model.

    ``native``: the spec stored by ``oracle.flows.save_flow``. ``public_tarflow``: the first
    axis of ``blocks.0.class_embed`` ([K, 1, C]); 0 for an unconditional checkpoint.
    """
    p = Path(path)
    if not p.is_file():
        raise DataError(f"flow checkpoint {p} does not exist (config key oracle.checkpoint)")
    try:
        blob = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure is a bad file
        raise DataError(f"flow checkpoint {p} is unreadable: {type(exc).__name__}: {exc}") from None
    if fmt == "native":
        if not isinstance(blob, dict) or "spec" not in blob:
            raise DataError(f"flow checkpoint {p} is not an oracle flow file; set oracle.checkpoint_format: public_tarflow for a public TarFlow state dict")
        return int(blob["spec"].get("num_classes", 0))
    if fmt == "public_tarflow":
        sd = blob
        for key in ("model", "state_dict", "ema"):
            if isinstance(sd, dict) and isinstance(sd.get(key), dict):
                sd = sd[key]
                break
        if not isinstance(sd, dict):
            raise DataError(f"public TarFlow checkpoint {p} does not hold a state dict")
        for key, value in sd.items():
            if re.fullmatch(r"(module\.|_orig_mod\.)?blocks\.0\.class_embed", key):
                return int(value.shape[0])
        return 0
    raise ConfigError(f"config key 'oracle.checkpoint_format': {fmt!r} is not native or public_tarflow")


def check_checkpoint_classes(path: str | os.PathLike, fmt: str, data_path: str | os.PathLike,
                             data_classes: Sequence[str]) -> None:
    """Raise WorldError when the checkpoint's class count differs from the data's."""
    k = checkpoint_num_classes(path, fmt)
    if k != len(data_classes):
        shown = ", ".join(list(data_classes)[:5]) + (", ..." if len(data_classes) > 5 else "")
        raise WorldError(
            f"flow checkpoint {path} has {k} classes but the data {data_path} have {len(data_classes)} "
            f"({shown}); use a checkpoint trained on these classes or data.classes to select them"
        )
