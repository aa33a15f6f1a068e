"""The public TarFlow FID protocol's samples: annealed classifier-free guidance, then one
self-denoising gradient step. For FID numbers comparable with published TarFlow FIDs and for
pictures ONLY: these images do not follow the flow's density, so they are never oracle data
(DESIGN rule 5) and nothing here writes them where an experiment reads samples.

Protocol (facts of the public release's FID script, re-implemented here): draw the latent at
base temperature 1; invert with guidance weight ``g * (i + 1) / (T - 1)`` at token i + 1 of
every block; then move each image one step along the gradient of its log density, with the
step ``sigma^2`` (``sigma`` = the flow's training dequantization noise): by Tweedie's formula
``x + sigma^2 * grad log p_sigma(x)`` estimates the clean image behind a noisy one. Images are
clipped to [-1, 1]; a batch with a non-finite image is drawn again.
"""

from __future__ import annotations

import torch
from torch import Tensor

from oracle.errors import OracleError


def self_denoise(model, x: Tensor, y: Tensor | None, noise_std: float, lr_scale: float = 1.0) -> Tensor:
    """One gradient step ``x + lr_scale * noise_std**2 * grad_x log p(x | y)`` per image.

    ``x`` [n, C, H, W] on [-1, 1] (float); ``y`` LongTensor[n] or None; ``noise_std`` the flow's
    Gaussian dequantization sigma in [-1, 1] units. The gradient is that of the per-image
    negative log density (the training loss is its mean over images and dimensions, so it is
    scaled back by n * D). Returns a new tensor; the model's parameters get no gradient.
    """
    if noise_std < 0 or lr_scale < 0:
        raise OracleError(f"self_denoise: noise_std={noise_std} and lr_scale={lr_scale} must be >= 0")
    n, d = x.shape[0], x[0].numel()
    xg = x.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        z, _, logdets = model(xg, y)
        loss = model.loss(z, logdets)
        (grad,) = torch.autograd.grad(loss, [xg])
    return (x - lr_scale * noise_std**2 * n * d * grad).detach()


def public_protocol_samples(model, y: Tensor | None, *, guidance: float, noise_std: float,
                            generator: torch.Generator | None = None, n: int | None = None,
                            denoise: bool = True, annealed: bool = True, max_redraws: int = 10) -> Tensor:
    """Images [n, C, H, W] on [-1, 1] drawn by the public TarFlow FID protocol (not oracle data).

    ``y`` LongTensor[n] (or None with ``n`` for an unconditional flow); ``guidance`` the CFG
    weight (0 = none; e.g. 2.3 in the public ImageNet-64 command); ``noise_std`` the flow's
    training noise (the denoising step size); ``denoise``/``annealed`` switch the two parts off.
    """
    if guidance < 0:
        raise OracleError(f"public_protocol_samples: guidance={guidance} must be >= 0")
    model.eval()
    for _ in range(max_redraws + 1):
        if y is None:
            z = model.draw_noise(int(n), 1.0, generator)
        else:
            z = model.draw_noise(int(y.numel()), 1.0, generator)
        x = model.reverse(z, y, guidance, annealed_guidance=annealed)
        if denoise:
            x = self_denoise(model, x, y, noise_std)
        if torch.isfinite(x).all():
            return x.clamp(-1.0, 1.0)
    raise OracleError(f"public_protocol_samples: non-finite images in {max_redraws + 1} draws")


def public_protocol_fid(model, real_images, *, inception_weights: str, guidance: float, noise_std: float,
                        n_samples: int = 50000, batch_size: int = 64, seed: int = 0,
                        device: str | torch.device = "cpu", denoise: bool = True, annealed: bool = True) -> dict:
    """FID of the public TarFlow protocol's samples against ``real_images`` (comparable with
    published TarFlow FIDs; NOT a property of the oracle, whose data are exact samples).

    ``model`` a TarFlow (class labels drawn uniformly for a conditional one); ``real_images``
    uint8 [N, C, H, W] (the real training split, as the public script's reference
    statistics); ``inception_weights`` the local TF-FID file (torchvision-layout weights are
    refused: the number would not be an FID). Returns a JSON-able dict.
    """
    import numpy as np

    from oracle.validation import features as ft
    from oracle.validation import metrics as mt
    from oracle.validation.pretrained_nets import load_inception

    if n_samples < 2:
        raise OracleError(f"public_protocol_fid: n_samples={n_samples} must be >= 2")
    device = torch.device(device)
    net = load_inception(inception_weights).to(device)
    if net.feature_kind != "inception-fid":
        raise OracleError(f"public_protocol_fid: {inception_weights!r} is not the TF-FID Inception "
                          "(pt_inception-2015-12-05, 1008 classes): the result would not be an FID")
    f_real = ft.extract_features(net, real_images, batch_size, device)
    model.to(device).eval()
    gen = torch.Generator().manual_seed(int(seed))
    feats = []
    for start in range(0, int(n_samples), int(batch_size)):
        b = min(int(batch_size), int(n_samples) - start)
        y = torch.randint(model.num_classes, (b,), generator=gen).to(device) if model.num_classes else None
        x = public_protocol_samples(model, y, guidance=guidance, noise_std=noise_std, generator=gen, n=b,
                                    denoise=denoise, annealed=annealed)
        feats.append(ft.extract_features(net, x.float(), batch_size, device))
    f_s = np.concatenate(feats)
    return {"fid_public_protocol": mt.frechet_distance_features(f_s, f_real),
            "frechet_name": f"FID (public TarFlow protocol: guidance {guidance:g}"
                            f"{' annealed' if annealed else ''}{', self-denoised' if denoise else ''})",
            "feature_space": ft.feature_space_name(net), "n_samples": int(n_samples),
            "n_real": int(real_images.shape[0]), "guidance": float(guidance), "annealed": bool(annealed),
            "denoise": bool(denoise), "noise_std": float(noise_std), "seed": int(seed),
            "exact_samples": False}


def main(argv: list[str] | None = None) -> int:
    """``python -m oracle.validation.public_fid``: the public TarFlow FID protocol for a trained
    flow file (``results/<run>/oracle/flow.pt``), against a real split file
    (``results/<run>/data/train.h5``); writes a JSON file. The samples are not kept."""
    import argparse

    from oracle.devices import pick_device
    from oracle.flow_checkpoints import load_flow
    from oracle.io.atomic import write_json_atomic
    from oracle.io.images import read_images_h5

    ap = argparse.ArgumentParser(prog="python -m oracle.validation.public_fid", description=main.__doc__)
    ap.add_argument("--flow", required=True, help="flow file written by the oracle stage")
    ap.add_argument("--real", required=True, help="real images (.h5 written by the data stage)")
    ap.add_argument("--inception-weights", required=True, help="local pt_inception-2015-12-05 file")
    ap.add_argument("--noise-std", type=float, required=True, help="the flow's training noise (oracle.train.noise_std)")
    ap.add_argument("--guidance", type=float, default=0.0, help="CFG weight (public ImageNet-64 command: 2.3)")
    ap.add_argument("--no-denoise", action="store_true")
    ap.add_argument("--constant-guidance", action="store_true", help="no annealing of the guidance weight")
    ap.add_argument("--n", type=int, default=50000, help="samples (public script: 50,000)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--out", required=True, help="JSON file to write")
    a = ap.parse_args(argv)
    device = pick_device(a.device)
    model, _ = load_flow(a.flow, map_location=device)
    real = read_images_h5(a.real)["images"]
    out = public_protocol_fid(model, real, inception_weights=a.inception_weights, guidance=a.guidance,
                              noise_std=a.noise_std, n_samples=a.n, batch_size=a.batch_size, seed=a.seed,
                              device=device, denoise=not a.no_denoise, annealed=not a.constant_guidance)
    write_json_atomic(a.out, {**out, "flow": str(a.flow), "real": str(a.real)})
    print(f"{out['frechet_name']}: {out['fid_public_protocol']:.3f} ({a.n} samples) -> {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
