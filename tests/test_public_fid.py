"""oracle.validation.public_fid: the public TarFlow FID protocol's samples (pictures/FID only)."""

from __future__ import annotations

import pytest
import torch

from oracle.errors import OracleError
from oracle.flows import TarFlow
from oracle.validation.public_fid import public_protocol_samples, self_denoise


def _flow(img=(4, 4), num_classes=3, seed=0) -> TarFlow:
    torch.manual_seed(seed)
    m = TarFlow(1, img, 1, 32, 2, 1, head_dim=16, num_classes=num_classes).double()
    with torch.no_grad():  # a non-trivial flow: the zero-initialised output layers get weights
        for name, p in m.named_parameters():
            if "proj_out" in name:
                p.copy_(0.05 * torch.randn_like(p))
    return m.eval()


def test_annealed_guidance_rises_to_the_full_weight_at_the_last_token():
    m = _flow()
    y = torch.tensor([0, 1, 2, 1])
    z = m.draw_noise(4, 1.0, torch.Generator().manual_seed(1))
    const = m.reverse(z, y, 2.0)
    ann = m.reverse(z, y, 2.0, annealed_guidance=True)
    assert not torch.allclose(ann, const)
    # the cached and the uncached inversions index the tokens alike
    torch.testing.assert_close(m.reverse(z, y, 2.0, use_cache=False, annealed_guidance=True), ann)
    # without guidance the schedule is irrelevant: the exact inverse
    torch.testing.assert_close(m.reverse(z, y, 0.0, annealed_guidance=True), m.reverse(z, y))
    # two tokens per block: the only guided token has weight (0 + 1) / (2 - 1) = 1 x guidance
    m2 = _flow(img=(1, 2))
    z2 = m2.draw_noise(4, 1.0, torch.Generator().manual_seed(2))
    torch.testing.assert_close(m2.reverse(z2, y, 1.5, annealed_guidance=True), m2.reverse(z2, y, 1.5))


def test_self_denoise_is_a_tweedie_step_on_the_exact_log_density():
    m = _flow()
    y = torch.tensor([0, 2, 1])
    x = 0.5 * torch.randn(3, 1, 4, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    sigma = 0.07
    xg = x.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(m.log_prob(xg, y).sum(), [xg])
    step = self_denoise(m, x, y, sigma) - x
    # the training loss (float32 by design) against the float64 exact density: float32 tolerance
    torch.testing.assert_close(step, sigma**2 * grad, rtol=1e-5, atol=1e-6 * sigma**2)
    torch.testing.assert_close(self_denoise(m, x, y, 0.0), x)
    assert all(p.grad is None for p in m.parameters())
    with pytest.raises(OracleError, match="noise_std"):
        self_denoise(m, x, y, -0.1)


def test_public_protocol_samples_are_clipped_guided_and_denoised():
    m = _flow()
    y = torch.tensor([0, 1, 2, 0])
    gen = lambda: torch.Generator().manual_seed(4)  # noqa: E731
    x = public_protocol_samples(m, y, guidance=2.0, noise_std=0.05, generator=gen())
    assert x.shape == (4, 1, 4, 4) and x.abs().max() <= 1.0
    plain = public_protocol_samples(m, y, guidance=0.0, noise_std=0.05, generator=gen(), denoise=False)
    exact = m.reverse(m.draw_noise(4, 1.0, gen()), y).clamp(-1, 1)
    torch.testing.assert_close(plain, exact)
    assert not torch.allclose(x, plain)
    with pytest.raises(OracleError, match="guidance"):
        public_protocol_samples(m, y, guidance=-1.0, noise_std=0.05)


def test_public_protocol_fid_runs_on_tf_fid_weights_only(tmp_path):
    import numpy as np
    import torchvision

    from oracle.validation.public_fid import public_protocol_fid

    torch.manual_seed(5)
    fid_w = tmp_path / "pt_inception-2015-12-05-random.pth"
    net = torchvision.models.Inception3(num_classes=1008, aux_logits=False, init_weights=False)
    torch.save(net.state_dict(), fid_w)
    m = _flow().float()
    real = np.random.default_rng(0).integers(0, 256, (6, 1, 4, 4), dtype=np.uint8)
    out = public_protocol_fid(m, real, inception_weights=str(fid_w), guidance=1.0, noise_std=0.05,
                              n_samples=5, batch_size=4)
    assert out["exact_samples"] is False and out["n_samples"] == 5 and out["n_real"] == 6
    assert np.isfinite(out["fid_public_protocol"]) and out["fid_public_protocol"] >= 0
    assert "annealed" in out["frechet_name"] and "self-denoised" in out["frechet_name"]
    tv_w = tmp_path / "inception_v3_tv.pth"
    net = torchvision.models.Inception3(num_classes=1000, aux_logits=False, init_weights=False)
    torch.save(net.state_dict(), tv_w)
    with pytest.raises(OracleError, match="not the TF-FID Inception"):
        public_protocol_fid(m, real, inception_weights=str(tv_w), guidance=1.0, noise_std=0.05, n_samples=5)
