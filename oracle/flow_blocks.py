"""The flow blocks of TarFlow: causal attention, MLP, and the autoregressive affine MetaBlock
(one flow layer of `oracle.flows.TarFlow`), with the public release's parameter names and
shapes (see `oracle.flows`). Shapes: tokens [n, T, C*p*p] in, the same out; log-determinants
per block as the mean of -a over tokens and features (the release's convention; `TarFlow`
multiplies back to nats per image).
"""

from __future__ import annotations


import torch
import torch.nn.functional as F
from torch import Tensor, nn

from oracle.errors import ConfigError


def _up(t: Tensor) -> Tensor:
    """Half precision -> float32 (the release's `.float()`), leaving float32/float64 alone so
    a float64 model stays float64 throughout."""
    return t.float() if t.dtype in (torch.float16, torch.bfloat16) else t


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

    def forward(self, x: Tensor, mask: Tensor | bool | None = None, cache: _KVCache | None = None) -> Tensor:
        """x: [B, T, C]. `mask`: a boolean [T, T] attention mask, True for "exactly causal"
        (SDPA's ``is_causal``, which lets fused kernels such as FlashAttention run; an explicit
        mask forces a slower one), or None. With `cache`, x holds the next T tokens and attends
        to all cached ones."""
        b, t, c = x.shape
        h = self.norm(_up(x)).type(x.dtype)  # LayerNorm in (at least) float32, as in the release
        q, k, v = self.qkv(h).reshape(b, t, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        if cache is not None:
            start, stop = cache.length, cache.length + t
            cache.k[:, :, start:stop] = k
            cache.v[:, :, start:stop] = v
            cache.length = stop
            k, v = cache.k[:, :, :stop], cache.v[:, :, :stop]
        if mask is True:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale)
        else:
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

    def forward(self, x: Tensor, mask: Tensor | bool | None = None, cache: _KVCache | None = None) -> Tensor:
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

    def attention_mask(self) -> Tensor | bool:
        """True when the ``attn_mask`` buffer is exactly lower-triangular ones (then attention
        runs with ``is_causal=True``), else the buffer as a boolean mask: a checkpoint may carry
        another mask, and it is honoured as given."""
        mask = self.attn_mask.bool()
        return True if torch.equal(mask, torch.ones_like(mask).tril()) else mask

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
        mask = self.attention_mask()
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
        self, z: Tensor, y: Tensor | None = None, guidance: float = 0.0, use_cache: bool = True,
        annealed: bool = False,
    ) -> Tensor:
        """Invert `forward`: z [n, T, F] -> x [n, T, F], one token at a time.

        `use_cache=False` recomputes the full causal network for every token (O(T^2) work);
        it exists as a reference for the cached path. `guidance` > 0 is classifier-free
        guidance: NOT the inverse of `forward`, for pictures only (see TarFlow.sample).
        `annealed`: the weight of token i+1 is guidance * (i + 1) / (T - 1), rising to
        `guidance` at the last token (the public TarFlow FID script's schedule).
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

        def combine(a: Tensor, b: Tensor, i: int) -> tuple[Tensor, Tensor]:
            if not guidance:
                return a, b
            g = guidance * (i + 1) / (t - 1) if annealed else guidance
            (a_c, a_u), (b_c, b_u) = a.chunk(2), b.chunk(2)
            return a_c + g * (a_c - a_u), b_c + g * (b_c - b_u)

        if use_cache:
            caches = [_KVCache(rows, layer.attention.num_heads, t, layer.attention.head_dim, self.pos_embed)
                      for layer in self.attn_blocks]
            pos = self.permute(self.pos_embed, dim=0)
            cls = self.class_term(y_run)
            for i in range(t - 1):
                token = x[:, i : i + 1]
                if guidance:
                    token = torch.cat([token, token])
                a, b = combine(*self._token_params(token, i, pos, cls, caches), i)
                scale = _up(a[:, 0]).exp().type(a.dtype)
                x[:, i + 1] = z[:, i + 1] * scale + b[:, 0]
        else:
            for i in range(t - 1):
                inp = torch.cat([x, x]) if guidance else x
                a, b = combine(*self.affine_params(inp, y_run), i)
                scale = _up(a[:, i + 1]).exp().type(a.dtype)
                x[:, i + 1] = z[:, i + 1] * scale + b[:, i + 1]
        return self.permute(x)
