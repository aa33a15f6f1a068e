"""TarFlow: exact density, exact inverse, public-release compatibility.

Every expected value is computed independently of `oracle.flows`: autograd Jacobians,
numerical integration, a plain re-implementation of the documented algorithm from the raw
state dict, and a key list written down from the facts in DESIGN.md.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from oracle.errors import ConfigError, DataError, OracleError, WorldError
from oracle.flow_checkpoints import build_flow, check_checkpoint_classes, checkpoint_num_classes, load_flow, load_public_tarflow, save_flow
from oracle.flows import PerClassFlows, TarFlow



TINY = dict(in_channels=1, img_size=4, patch_size=2, channels=32, num_blocks=2,
            layers_per_block=2, head_dim=16)


def perturb(model: torch.nn.Module, scale: float = 0.05, seed: int = 0) -> torch.nn.Module:
    """Give proj_out (zero at init) random weights so the flow is not the identity."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "proj_out" in name:
                p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * scale)
    return model


def tiny(num_classes: int = 0, seed: int = 0, double: bool = True, **kw) -> TarFlow:
    torch.manual_seed(seed)
    m = TarFlow(**{**TINY, **kw}, num_classes=num_classes)
    m = m.double() if double else m
    return perturb(m, seed=seed).eval()


# ------------------------------------------------------------------------------------------
# Independent reference: the documented algorithm written plainly from a raw state dict
# ------------------------------------------------------------------------------------------

def ref_layernorm(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


def ref_block(sd, i, tokens, y, num_layers, head_dim, flip):
    """One MetaBlock on tokens [n, T, F]: returns (z [n, T, F], a [n, T, F])."""
    p = f"blocks.{i}."
    x = tokens.flip(1) if flip else tokens
    pos = sd[p + "pos_embed"].flip(0) if flip else sd[p + "pos_embed"]
    h = x @ sd[p + "proj_in.weight"].T + sd[p + "proj_in.bias"] + pos
    if p + "class_embed" in sd:
        ce = sd[p + "class_embed"]  # [K, 1, C]
        rows = [ce.mean(0) if (y is None or int(yy) < 0) else ce[int(yy)] for yy in
                (y if y is not None else [None] * x.shape[0])]
        h = h + torch.stack(rows)
    n, T, C = h.shape
    heads = C // head_dim
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for j in range(num_layers):
        q_ = f"{p}attn_blocks.{j}."
        u = ref_layernorm(h, sd[q_ + "attention.norm.weight"], sd[q_ + "attention.norm.bias"])
        qkv = u @ sd[q_ + "attention.qkv.weight"].T + sd[q_ + "attention.qkv.bias"]
        qkv = qkv.reshape(n, T, 3, heads, head_dim)  # documented layout [3, heads, head_dim]
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]  # [n, T, heads, d]
        logits = torch.einsum("nthd,nshd->nhts", q, k) / math.sqrt(head_dim)
        logits = logits.masked_fill(~causal, float("-inf"))
        att = torch.einsum("nhts,nshd->nthd", logits.softmax(-1), v).reshape(n, T, C)
        h = h + att @ sd[q_ + "attention.proj.weight"].T + sd[q_ + "attention.proj.bias"]
        u = ref_layernorm(h, sd[q_ + "mlp.norm.weight"], sd[q_ + "mlp.norm.bias"])
        u = u @ sd[q_ + "mlp.main.0.weight"].T + sd[q_ + "mlp.main.0.bias"]
        u = 0.5 * u * (1 + torch.erf(u / math.sqrt(2)))  # exact GELU
        h = h + u @ sd[q_ + "mlp.main.2.weight"].T + sd[q_ + "mlp.main.2.bias"]
    out = h @ sd[p + "proj_out.weight"].T + sd[p + "proj_out.bias"]
    out = torch.cat([torch.zeros_like(out[:, :1]), out[:, :-1]], 1)  # token t sees < t
    Fdim = x.shape[-1]
    a, b = out[..., :Fdim], out[..., Fdim:]
    z = (x - b) * torch.exp(-a)
    return (z.flip(1) if flip else z), a


def ref_log_prob(sd, x, y, cfg):
    """Full density from the raw state dict: unfold patches, blocks, N(0, I) base."""
    tokens = F.unfold(x, cfg["patch_size"], stride=cfg["patch_size"]).transpose(1, 2)
    logdet = torch.zeros(x.shape[0], dtype=torch.float64)
    for i in range(cfg["num_blocks"]):
        tokens, a = ref_block(sd, i, tokens, y, cfg["layers_per_block"], cfg["head_dim"], i % 2 == 1)
        logdet = logdet - a.sum((1, 2))
    D = tokens[0].numel()
    return -0.5 * (tokens**2).sum((1, 2)) - 0.5 * D * math.log(2 * math.pi) + logdet


def expected_public_keys(num_blocks, layers, T, Fdim, C, K, e=4, nvp=True):
    """Key -> shape of the public release, written down from DESIGN.md's facts."""
    keys = {"var": [T, Fdim]}
    for i in range(num_blocks):
        p = f"blocks.{i}."
        keys |= {p + "proj_in.weight": [C, Fdim], p + "proj_in.bias": [C],
                 p + "pos_embed": [T, C], p + "attn_mask": [T, T],
                 p + "proj_out.weight": [(2 if nvp else 1) * Fdim, C],
                 p + "proj_out.bias": [(2 if nvp else 1) * Fdim]}
        if K:
            keys[p + "class_embed"] = [K, 1, C]
        for j in range(layers):
            q = f"{p}attn_blocks.{j}."
            keys |= {q + "attention.norm.weight": [C], q + "attention.norm.bias": [C],
                     q + "attention.qkv.weight": [3 * C, C], q + "attention.qkv.bias": [3 * C],
                     q + "attention.proj.weight": [C, C], q + "attention.proj.bias": [C],
                     q + "mlp.norm.weight": [C], q + "mlp.norm.bias": [C],
                     q + "mlp.main.0.weight": [e * C, C], q + "mlp.main.0.bias": [e * C],
                     q + "mlp.main.2.weight": [C, e * C], q + "mlp.main.2.bias": [C]}
    return keys


def public_like_state_dict(keys, seed=0):
    """A state dict with the public layout, random values, built without oracle.flows."""
    g = torch.Generator().manual_seed(seed)
    sd = {}
    for k, shape in keys.items():
        if k.endswith("attn_mask"):
            sd[k] = torch.tril(torch.ones(shape))
        elif k == "var":
            sd[k] = torch.ones(shape)  # nvp prior: N(0, I)
        elif k.endswith("norm.weight"):
            sd[k] = 1 + 0.1 * torch.randn(shape, generator=g)
        else:
            sd[k] = (0.02 if "proj_out" in k else 0.05) * torch.randn(shape, generator=g)
    return sd


# ------------------------------------------------------------------------------------------
# Density
# ------------------------------------------------------------------------------------------

def test_logdet_equals_autograd_jacobian():
    m = tiny(num_classes=0)
    x = torch.randn(1, 1, 4, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(3))

    def f(flat):
        return m(flat.view(1, 1, 4, 4))[0].reshape(-1)

    J = torch.autograd.functional.jacobian(f, x.reshape(-1))
    sign, logabsdet = torch.linalg.slogdet(J)
    z = f(x.reshape(-1))
    D = z.numel()
    expected = -0.5 * (z**2).sum() - 0.5 * D * math.log(2 * math.pi) + logabsdet
    assert abs(float(logabsdet)) > 0.5  # the flow is genuinely non-volume-preserving here
    got = m.log_prob(x)
    assert got.dtype == torch.float64 and got.shape == (1,)
    assert torch.allclose(got, expected.reshape(1), atol=1e-10, rtol=0)
    # training convention: forward's logdets is the per-dim mean, D times smaller
    _, _, logdets = m(x)
    assert torch.allclose(logdets * D, logabsdet.reshape(1), atol=1e-10)


def test_log_prob_float32_model_accumulates_in_float64():
    m32 = tiny(num_classes=0, double=False)
    m64 = tiny(num_classes=0, double=True)
    x = torch.randn(4, 1, 4, 4, generator=torch.Generator().manual_seed(0))
    lp32, lp64 = m32.log_prob(x), m64.log_prob(x.double())
    assert lp32.dtype == torch.float64
    assert torch.allclose(lp32, lp64, rtol=1e-5, atol=1e-4)


def _toy(seed=0):
    """2-D flow: img (1, 2), patch 1 -> two tokens of one feature, two blocks (both coords move)."""
    torch.manual_seed(seed)
    m = TarFlow(1, (1, 2), 1, 32, 2, 1, head_dim=16).double()
    return perturb(m, scale=0.1, seed=seed).eval()


@pytest.mark.parametrize("tau,box,n", [(1.0, 13.0, 321), (1.7, 30.0, 481)])
def test_toy_density_integrates_to_one(tau, box, n):
    # the flow's tails are wider than the base's, hence the wide boxes
    m = _toy()
    g = np.linspace(-box, box, n)
    X1, X2 = np.meshgrid(g, g, indexing="ij")
    pts = torch.tensor(np.stack([X1.ravel(), X2.ravel()], 1)).view(-1, 1, 1, 2)
    with torch.no_grad():
        logp = m.log_prob(pts, base_temperature=tau).numpy().reshape(n, n)
    mass = np.trapezoid(np.trapezoid(np.exp(logp), g, axis=1), g)
    assert abs(mass - 1.0) < 1e-4
    # not trivially the base Gaussian: the density differs from N(0, tau^2 I) somewhere
    base = -(X1**2 + X2**2) / (2 * tau**2) - np.log(2 * np.pi * tau**2)
    inner = (np.abs(X1) < 3) & (np.abs(X2) < 3)
    assert np.abs(logp - base)[inner].max() > 0.1


def test_base_temperature_formula():
    """tau only changes the base term: log p_tau - log p_1 = -|z|^2/2 (1/tau^2 - 1) - D log tau."""
    m = tiny(num_classes=0)
    x = torch.randn(3, 1, 4, 4, dtype=torch.float64)
    z = m(x)[0]
    D = 16
    tau = 0.7
    expected = -0.5 * (z**2).sum((1, 2)) * (1 / tau**2 - 1) - D * math.log(tau)
    diff = m.log_prob(x, base_temperature=tau) - m.log_prob(x)
    assert torch.allclose(diff, expected, atol=1e-10)


# ------------------------------------------------------------------------------------------
# Sampling
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("double", [True, False])
def test_sample_forward_recovers_drawn_z(double):
    m = tiny(num_classes=3, double=double)
    y = torch.tensor([0, 1, 2, 1, -1, 0])
    tau = 0.8
    x = m.sample(y, base_temperature=tau, generator=torch.Generator().manual_seed(7))
    assert x.shape == (6, 1, 4, 4)
    # the documented latent convention, re-drawn here from the same seed
    eps = torch.randn(6, 4, 4, generator=torch.Generator().manual_seed(7))
    z = m(x, y)[0]
    tol = 1e-10 if double else 1e-4
    assert torch.allclose(z.double(), tau * eps.double(), atol=tol, rtol=0)
    lp = m.log_prob(x, y, base_temperature=tau)
    assert torch.isfinite(lp).all()


def test_kv_cached_sampler_equals_naive_inversion():
    m = tiny(num_classes=3)
    y = torch.tensor([2, 0, 1, -1])
    z = m.draw_noise(4, 1.0, torch.Generator().manual_seed(1))
    fast = m.reverse(z, y, use_cache=True)
    slow = m.reverse(z, y, use_cache=False)
    assert torch.allclose(fast, slow, atol=1e-12, rtol=0)
    # independent naive inversion: fixed-point iteration of the forward map, block by block.
    # After T sweeps an autoregressive map is inverted exactly (token t is final after t sweeps).
    tokens = z.clone()
    with torch.no_grad():
        for i in reversed(range(len(m.blocks))):
            flip = i % 2 == 1
            target = tokens
            guess = target.clone()
            for _ in range(tokens.shape[1]):
                zi, a = m.blocks[i](guess, y)
                # z = (x - b) exp(-a)  =>  x = x_guess + (z_target - z_guess) * exp(a)
                a_tok = a.flip(1) if flip else a
                guess = guess + (target - zi) * torch.exp(a_tok)
            tokens = guess
    assert torch.allclose(fast, m.unpatchify(tokens), atol=1e-10, rtol=0)
    assert torch.allclose(m.unpatchify(tokens), F.fold(tokens.transpose(1, 2), (4, 4), 2, stride=2))


def test_sample_is_deterministic_and_validates():
    m = tiny(num_classes=2)
    a = m.sample(torch.tensor([0, 1]), generator=torch.Generator().manual_seed(0))
    b = m.sample(torch.tensor([0, 1]), generator=torch.Generator().manual_seed(0))
    assert torch.equal(a, b)
    with pytest.raises(OracleError, match="needs n"):
        m.sample(None)
    assert m.sample(None, n=3, generator=torch.Generator().manual_seed(0)).shape == (3, 1, 4, 4)
    with pytest.raises(DataError, match="labels must lie"):
        m.sample(torch.tensor([5]))
    with pytest.raises(DataError, match="shape"):
        m.log_prob(torch.zeros(2, 3, 4, 4))


def test_guidance_zero_is_exact_and_nonzero_differs():
    m = tiny(num_classes=3)
    y = torch.tensor([0, 2])
    g = lambda: torch.Generator().manual_seed(4)  # noqa: E731
    plain = m.sample(y, generator=g())
    assert torch.equal(plain, m.sample(y, generator=g(), guidance=0.0))
    guided = m.sample(y, generator=g(), guidance=2.0)
    assert not torch.allclose(plain, guided)
    assert torch.allclose(guided, m.sample(y, generator=g(), guidance=2.0, use_cache=False), atol=1e-10)


# ------------------------------------------------------------------------------------------
# Labels, classes, per-class flows
# ------------------------------------------------------------------------------------------

def test_dropped_label_uses_mean_class_embedding():
    m = tiny(num_classes=3)
    x = torch.randn(4, 1, 4, 4, dtype=torch.float64)
    lp_drop = m.log_prob(x, torch.full((4,), -1))
    assert torch.allclose(lp_drop, m.log_prob(x, None), atol=0, rtol=0)
    # independently: a copy whose class 0 embedding is replaced by the mean, evaluated at class 0
    m2 = tiny(num_classes=3)
    with torch.no_grad():
        for b in m2.blocks:
            b.class_embed[0] = b.class_embed.mean(0)
    assert torch.allclose(lp_drop, m2.log_prob(x, torch.zeros(4, dtype=torch.long)), atol=1e-12)
    mixed = torch.tensor([-1, 1, -1, 2])
    expected = torch.where(mixed < 0, lp_drop, m.log_prob(x, mixed.clamp(min=0)))
    assert torch.allclose(m.log_prob(x, mixed), expected, atol=1e-12)
    # sampling with -1 is sampling with the mean embedding
    s1 = m.sample(torch.full((2,), -1), generator=torch.Generator().manual_seed(0))
    s2 = m.sample(None, n=2, generator=torch.Generator().manual_seed(0))
    assert torch.equal(s1, s2)


def test_log_prob_classes_conditional_equals_loop():
    m = tiny(num_classes=4)
    x = torch.randn(5, 1, 4, 4, dtype=torch.float64)
    classes = torch.tensor([3, 0, 2])
    got = m.log_prob_classes(x, classes)
    loop = torch.stack([m.log_prob(x, torch.full((5,), int(k))) for k in classes], 1)
    assert got.shape == (5, 3) and got.dtype == torch.float64
    assert torch.allclose(got, loop, atol=1e-10, rtol=0)
    assert torch.allclose(m.log_prob_classes(x, classes, max_rows=4), loop, atol=1e-10, rtol=0)
    assert not torch.allclose(got[:, 0], got[:, 1])  # classes differ


def test_per_class_flows_interface():
    flows = [tiny(num_classes=0, seed=s) for s in range(3)]
    pc = PerClassFlows(flows)
    assert pc.num_classes == 3
    x = torch.randn(6, 1, 4, 4, dtype=torch.float64)
    y = torch.tensor([0, 2, 1, 1, 0, 2])
    lp = pc.log_prob(x, y)
    for i in range(6):
        assert torch.allclose(lp[i], flows[int(y[i])].log_prob(x[i : i + 1])[0], atol=1e-10)
    got = pc.log_prob_classes(x, torch.tensor([2, 0]))
    loop = torch.stack([flows[2].log_prob(x), flows[0].log_prob(x)], 1)
    assert torch.allclose(got, loop, atol=1e-10, rtol=0)
    # sampling: row i is flow y_i applied to the i-th latent of the documented convention
    s = pc.sample(y, base_temperature=0.9, generator=torch.Generator().manual_seed(2))
    eps = torch.randn(6, 4, 4, generator=torch.Generator().manual_seed(2)).double()
    for i in range(6):
        zi = flows[int(y[i])](s[i : i + 1])[0]
        assert torch.allclose(zi[0], 0.9 * eps[i], atol=1e-10)
    with pytest.raises(OracleError):
        pc.log_prob(x, None)


def test_unconditional_flow_rejects_labels():
    m = tiny(num_classes=0)
    with pytest.raises(OracleError, match="unconditional"):
        m.log_prob(torch.zeros(1, 1, 4, 4, dtype=torch.float64), torch.tensor([1]))
    with pytest.raises(OracleError, match="class-conditional"):
        m.log_prob_classes(torch.zeros(1, 1, 4, 4, dtype=torch.float64), torch.tensor([0]))


# ------------------------------------------------------------------------------------------
# Public-release compatibility
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("K,nvp", [(0, True), (3, True), (2, False)])
def test_public_layout_loads_strict_and_matches_reference(K, nvp):
    cfg = dict(in_channels=3, img_size=8, patch_size=2, channels=32, num_blocks=3,
               layers_per_block=2, head_dim=16)
    T, Fdim = (8 // 2) ** 2, 3 * 4
    keys = expected_public_keys(3, 2, T, Fdim, 32, K, nvp=nvp)
    m = TarFlow(**cfg, num_classes=K, nvp=nvp)
    assert {k: list(v.shape) for k, v in m.state_dict().items()} == keys
    sd = public_like_state_dict(keys)
    m.load_state_dict(sd, strict=True)
    if not nvp:
        return  # the reference below is the affine (nvp) algorithm
    m = m.double().eval()
    sd64 = {k: v.double() for k, v in sd.items()}
    x = torch.randn(3, 3, 8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    y = torch.tensor([0, 2, -1]) if K else None
    # one block against the plain recomputation
    tokens = F.unfold(x, 2, stride=2).transpose(1, 2)
    z_ref, a_ref = ref_block(sd64, 1, tokens, y, 2, 16, flip=True)
    z_mod, a_mod = m.blocks[1](tokens, y)
    assert torch.allclose(z_mod, z_ref, atol=1e-10) and torch.allclose(a_mod, a_ref, atol=1e-10)
    # the whole density
    assert torch.allclose(m.log_prob(x, y), ref_log_prob(sd64, x, y, {**cfg}), atol=1e-8)


def test_load_public_tarflow_file(tmp_path):
    spec = dict(in_channels=3, img_size=8, patch_size=4, channels=32, num_blocks=2,
                layers_per_block=1, head_dim=16, num_classes=3)
    keys = expected_public_keys(2, 1, 4, 48, 32, 3)
    sd = public_like_state_dict(keys, seed=1)
    path = tmp_path / "afhq_model.pth"
    torch.save(sd, path)
    m = load_public_tarflow(path, spec)
    assert not m.training and m.dtype == torch.float32
    assert all(torch.equal(m.state_dict()[k], v) for k, v in sd.items())
    wrapped = tmp_path / "wrapped.pth"
    torch.save({"model": {"module." + k: v for k, v in sd.items()}}, wrapped)
    assert torch.equal(load_public_tarflow(wrapped, spec).blocks[0].class_embed, sd["blocks.0.class_embed"])
    with pytest.raises(OracleError, match=r"afhq_model\.pth.*class_embed.*\[3, 1, 32\]"):
        load_public_tarflow(path, {**spec, "num_classes": 10})
    with pytest.raises(OracleError, match="missing: blocks.2"):
        load_public_tarflow(path, {**spec, "num_blocks": 3})
    with pytest.raises(DataError, match="does not exist"):
        load_public_tarflow(tmp_path / "nope.pth", spec)


# ------------------------------------------------------------------------------------------
# Specs and files
# ------------------------------------------------------------------------------------------

def test_build_save_load_roundtrip(tmp_path):
    spec = dict(TINY, num_classes=2)
    a = build_flow(spec, seed=3)
    b = build_flow(spec, seed=3)
    assert all(torch.equal(a.state_dict()[k], v) for k, v in b.state_dict().items())
    perturb(a)
    path = tmp_path / "oracle" / "flow.pt"
    save_flow(path, a, spec, extra={"note": "x"})
    assert [p.name for p in path.parent.iterdir()] == ["flow.pt"]  # no temp leftovers
    m, s = load_flow(path)
    assert not m.training and s["num_classes"] == 2
    x = torch.randn(2, 1, 4, 4)
    assert torch.equal(m.log_prob(x, torch.tensor([0, 1])), a.eval().log_prob(x, torch.tensor([0, 1])))
    pc_spec = dict(TINY, num_classes=3, per_class=True)
    pc = build_flow(pc_spec, seed=0)
    assert isinstance(pc, PerClassFlows) and pc.num_classes == 3
    save_flow(tmp_path / "pc.pt", pc, pc_spec)
    assert isinstance(load_flow(tmp_path / "pc.pt")[0], PerClassFlows)
    with pytest.raises(ConfigError, match="does not describe"):
        save_flow(tmp_path / "bad.pt", a, dict(TINY, num_classes=5))
    assert not (tmp_path / "bad.pt").exists()
    with pytest.raises(ConfigError, match="unknown key"):
        build_flow(dict(TINY, colour=1))
    with pytest.raises(ConfigError, match="missing"):
        build_flow({"in_channels": 1})
    with pytest.raises(ConfigError, match="multiple of patch_size"):
        build_flow(dict(TINY, img_size=5))


def test_rectangular_images():
    torch.manual_seed(0)
    m = perturb(TarFlow(2, (4, 6), 2, 32, 2, 1, head_dim=16).double()).eval()
    x = torch.randn(2, 2, 4, 6, dtype=torch.float64)
    tokens = m.patchify(x)
    assert torch.equal(tokens, F.unfold(x, 2, stride=2).transpose(1, 2))
    assert torch.equal(m.unpatchify(tokens), x)
    s = m.sample(None, n=2, generator=torch.Generator().manual_seed(0))
    assert s.shape == (2, 2, 4, 6)
    assert torch.isfinite(m.log_prob(s)).all()


def test_checkpoint_num_classes(tmp_path):
    spec = {"in_channels": 1, "img_size": 4, "patch_size": 2, "channels": 8, "num_blocks": 1,
            "layers_per_block": 1, "head_dim": 8, "num_classes": 4}
    native = tmp_path / "flow.pt"
    save_flow(native, build_flow(spec, seed=0), spec)
    assert checkpoint_num_classes(native, "native") == 4
    public = tmp_path / "public.pth"
    torch.save({"blocks.0.class_embed": torch.zeros(3, 1, 8), "blocks.0.proj_in.weight": torch.zeros(8, 4)}, public)
    assert checkpoint_num_classes(public, "public_tarflow") == 3
    wrapped = tmp_path / "wrapped.pth"
    torch.save({"model": {"module.blocks.0.class_embed": torch.zeros(5, 1, 8)}}, wrapped)
    assert checkpoint_num_classes(wrapped, "public_tarflow") == 5
    with pytest.raises(WorldError, match=r"has 3 classes but the data .* have 10"):
        check_checkpoint_classes(public, "public_tarflow", "train.h5", [str(i) for i in range(10)])
    check_checkpoint_classes(native, "native", "train.h5", ["a", "b", "c", "d"])
    with pytest.raises(DataError, match="does not exist"):
        checkpoint_num_classes(tmp_path / "nope.pth", "native")
    with pytest.raises(DataError, match="public_tarflow"):
        checkpoint_num_classes(public, "native")


@pytest.mark.parametrize("double", [True, False])
def test_causal_attention_flag_equals_the_explicit_mask(double):
    """The attention runs with is_causal=True (fused kernels) when the mask buffer is exactly
    lower-triangular; an explicit boolean mask gives the same numbers, and a checkpoint's
    non-causal mask is honoured rather than replaced."""
    from oracle.flow_blocks import Attention

    g = torch.Generator().manual_seed(3)
    dtype = torch.float64 if double else torch.float32
    att = Attention(32, 16).to(dtype)
    x = torch.randn(5, 9, 32, generator=g, dtype=dtype)
    tol = dict(rtol=0, atol=1e-12) if double else dict(rtol=1e-5, atol=1e-6)
    explicit = att(x, torch.ones(9, 9, dtype=torch.bool).tril())
    torch.testing.assert_close(att(x, True), explicit, **tol)
    # ... and the flag really is causal: changing a later token leaves earlier outputs alone
    x2 = x.clone()
    x2[:, 5:] += torch.randn(5, 4, 32, generator=g, dtype=dtype)  # (not a constant: LayerNorm removes those)
    torch.testing.assert_close(att(x2, True)[:, :5], att(x, True)[:, :5], **tol)
    assert not torch.allclose(att(x2, True)[:, 5:], att(x, True)[:, 5:])

    model = tiny(num_classes=2, double=double)
    block = model.blocks[0]
    assert block.attention_mask() is True
    xi = torch.rand(4, 1, 4, 4, generator=g, dtype=dtype) * 2 - 1
    y = torch.tensor([0, 1, 0, 1])
    before = model.log_prob(xi, y)
    with torch.no_grad():
        block.attn_mask[2, 0] = 0.0  # not the causal mask (row T-1 would not do: its output is shifted out)
    assert isinstance(block.attention_mask(), torch.Tensor)
    assert not torch.allclose(model.log_prob(xi, y), before)
