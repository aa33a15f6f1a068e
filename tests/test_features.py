"""oracle.validation.features: local-weight Inception/ResNet loading, the domain CNN, naming rules."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import torchvision
from sklearn.datasets import load_digits

from oracle.validation import features, pretrained_nets
from oracle.errors import DataError, OracleError



# ------------------------------------------------------------------ Inception


@pytest.fixture(scope="module")
def tv_inception(tmp_path_factory):
    """A randomly initialised torchvision inception_v3 (with AuxLogits) saved as a state dict."""
    torch.manual_seed(0)
    model = torchvision.models.inception_v3(weights=None, aux_logits=True, init_weights=False).eval()
    path = tmp_path_factory.mktemp("inc") / "inception_v3_random.pth"
    # drop num_batches_tracked, as in old checkpoint files
    torch.save({k: v for k, v in model.state_dict().items() if "num_batches_tracked" not in k}, path)
    return model, path


def test_load_inception_torchvision_layout_matches_torchvision_forward(tv_inception):
    model, path = tv_inception
    net = pretrained_nets.load_inception(path)
    assert net.feature_kind == "inception-torchvision" and net.layout == "torchvision"
    assert "inception_v3_random.pth" in features.feature_space_name(net)
    x = torch.rand(2, 3, 32, 32, generator=torch.Generator().manual_seed(1)) * 2 - 1
    pooled = {}
    hook = model.avgpool.register_forward_hook(lambda m, i, o: pooled.setdefault("f", o.flatten(1)))
    with torch.no_grad():
        ref_logits = model(F.interpolate(x, size=(299, 299), mode="bilinear", align_corners=False))
    hook.remove()
    feats, probs = features.features_and_probs(net, x, batch_size=1)
    assert feats.shape == (2, 2048) and feats.dtype == np.float64
    np.testing.assert_allclose(feats, pooled["f"].double().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(probs, torch.softmax(ref_logits.double(), 1).numpy(), rtol=1e-5, atol=1e-7)


def test_load_inception_detects_pytorch_fid_layout(tmp_path):
    torch.manual_seed(3)
    sd = torchvision.models.Inception3(num_classes=1008, aux_logits=False, init_weights=False).state_dict()
    path = tmp_path / "pt_inception-2015-12-05-random.pth"
    torch.save(sd, path)
    net = pretrained_nets.load_inception(path)
    assert net.feature_kind == "inception-fid"
    assert isinstance(net, pretrained_nets.FIDInceptionFeatureNet)
    assert features.frechet_metric_name(net) == "FID"
    gray = torch.rand(1, 1, 16, 16) * 2 - 1  # grayscale is repeated to 3 channels
    f_fid = features.extract_features(net, gray)
    f_tv = features.extract_features(pretrained_nets.load_inception(path, layout="torchvision"), gray)
    assert f_fid.shape == (1, 2048) and np.isfinite(f_fid).all()
    assert not np.allclose(f_fid, f_tv)


def test_load_inception_rejects_other_files(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        pretrained_nets.load_inception(tmp_path / "missing.pth")
    resnet = tmp_path / "resnet.pth"
    torch.save(torchvision.models.resnet18(weights=None).state_dict(), resnet)
    with pytest.raises(OracleError, match="pytorch-fid"):
        pretrained_nets.load_inception(resnet)
    junk = tmp_path / "junk.pth"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(DataError, match="unreadable"):
        pretrained_nets.load_inception(junk)


def test_load_resnet_matches_torchvision(tmp_path):
    torch.manual_seed(4)
    model = torchvision.models.resnet18(weights=None, num_classes=10).eval()
    path = tmp_path / "r18.pth"
    torch.save({"state_dict": {f"module.{k}": v for k, v in model.state_dict().items()}}, path)
    net = pretrained_nets.load_resnet(path, size=64)
    assert net.feature_kind == "resnet" and net.feature_dim == 512 and "resnet-18" in net.feature_space
    x = torch.rand(3, 3, 32, 32) * 2 - 1
    xin = F.interpolate(x, size=(64, 64), mode="bilinear", align_corners=False)
    xin = ((xin + 1) / 2 - torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)) / \
        torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    with torch.no_grad():
        ref = torch.softmax(model(xin).double(), 1).numpy()
    np.testing.assert_allclose(features.class_probs(net, x), ref, rtol=1e-5, atol=1e-7)


# ------------------------------------------------------------------ domain CNN on sklearn digits


@pytest.fixture(scope="module")
def digits():
    d = load_digits()
    imgs = np.round(d.images * (255.0 / 16.0)).astype(np.uint8)[:, None]  # [1797, 1, 8, 8]
    return imgs, d.target.astype(np.int64)


@pytest.fixture(scope="module")
def digits_net(digits):
    imgs, y = digits
    return features.train_domain_feature_net(imgs[:1200], y[:1200], epochs=10, seed=0, feature_dim=32,
                                             width=16, dataset_name="digits", progress=False)


def test_domain_net_beats_chance_on_held_out_digits(digits, digits_net):
    imgs, y = digits
    probs = features.class_probs(digits_net, imgs[1200:])
    assert probs.shape == (597, 10)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-12)
    acc = float((probs.argmax(1) == y[1200:]).mean())
    assert acc > 0.8, acc  # chance is 0.1
    assert digits_net.train_info["train_accuracy"] > 0.8
    assert digits_net.feature_space == "domain CNN trained on digits train split (32-d penultimate layer)"


def test_domain_net_features_shapes_and_input_scales(digits, digits_net):
    imgs, _ = digits
    f_u8 = features.extract_features(digits_net, imgs[:10], batch_size=3)
    f_float = features.extract_features(digits_net, torch.from_numpy(imgs[:10]).float() / 127.5 - 1)
    assert f_u8.shape == (10, 32) and f_u8.dtype == np.float64
    np.testing.assert_allclose(f_u8, f_float, rtol=1e-5, atol=1e-5)  # float32, other batching
    with pytest.raises(OracleError, match="-1, 1"):
        features.extract_features(digits_net, imgs[:2].astype(np.float32))  # 0..255 floats


def test_domain_net_is_deterministic_and_seed_dependent(digits):
    imgs, y = digits
    kw = dict(epochs=1, feature_dim=8, width=8, progress=False)
    a = features.train_domain_feature_net(imgs[:300], y[:300], seed=5, **kw)
    b = features.train_domain_feature_net(imgs[:300], y[:300], seed=5, **kw)
    c = features.train_domain_feature_net(imgs[:300], y[:300], seed=6, **kw)
    for k, v in a.state_dict().items():
        assert torch.equal(v, b.state_dict()[k]), k
    assert any(not torch.equal(v, c.state_dict()[k]) for k, v in a.state_dict().items())


def test_domain_net_save_load_roundtrip(tmp_path, digits, digits_net):
    imgs, _ = digits
    path = tmp_path / "sub" / "feature_net.pt"
    features.save_feature_net(path, digits_net)
    assert [p.name for p in path.parent.iterdir()] == ["feature_net.pt"]  # no temp file left
    loaded = features.load_feature_net(path)
    np.testing.assert_array_equal(features.extract_features(loaded, imgs[:20]),
                                  features.extract_features(digits_net, imgs[:20]))
    assert loaded.train_info == digits_net.train_info
    assert loaded.feature_space == digits_net.feature_space
    bad = tmp_path / "bad.pt"
    torch.save({"kind": "other"}, bad)
    with pytest.raises(DataError, match="save_feature_net"):
        features.load_feature_net(bad)


@pytest.mark.parametrize("shape", [(3, 32, 32), (3, 96, 80)])
def test_domain_net_architecture_adapts_to_image_size(shape):
    net = features.DomainFeatureNet(shape[0], 4, min(shape[1:]), feature_dim=16, width=8)
    x = torch.rand(2, *shape) * 2 - 1
    assert features.extract_features(net, x).shape == (2, 16)
    assert features.class_probs(net, x).shape == (2, 4)


def test_train_rejects_bad_labels(digits):
    imgs, y = digits
    with pytest.raises(OracleError, match="labels"):
        features.train_domain_feature_net(imgs[:10], y[:9], epochs=1)
    with pytest.raises(OracleError, match="labels must lie"):
        features.train_domain_feature_net(imgs[:10], y[:10], epochs=1, num_classes=2)


# ------------------------------------------------------------------ naming


def test_metric_names_follow_the_feature_space():
    assert features.frechet_metric_name("inception-fid") == "FID"
    assert features.frechet_metric_name("domain") == "FD (domain features)"
    assert features.frechet_metric_name("resnet") == "FD (ResNet features)"
    assert "torchvision" in features.frechet_metric_name("inception-torchvision")
    assert features.inception_score_name("inception-fid") == "IS"
    assert "domain" in features.inception_score_name("domain")
    assert features.feature_space_name("domain") == "domain CNN trained on the real train split"
    with pytest.raises(OracleError, match="feature kind"):
        features.frechet_metric_name("vgg")


# ------------------------------------------------------------------ TF-FID Inception: hand-written vs library


def _random_tf_fid_state_dict(seed: int) -> dict:
    """Random weights in the TF-FID file layout (pt_inception-2015-12-05 names, fc 1008 x 2048).

    BatchNorm statistics come from one training-mode pass over random images (so activations
    stay of order 1 through the 94 conv layers) and the BN affine terms are drawn at random: a
    wrong pool or a wrong BN epsilon anywhere in the network changes the features.
    """
    torch.manual_seed(seed)
    net = torchvision.models.Inception3(num_classes=1008, aux_logits=False, init_weights=True)
    for m in net.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.momentum = None  # running stats = plain average over the calibration pass
            torch.nn.init.uniform_(m.weight, 0.5, 1.5)
            torch.nn.init.normal_(m.bias, 0.0, 0.1)
    net.train()
    with torch.no_grad():
        net(torch.rand(4, 3, 299, 299) * 2 - 1)
    return {k: v for k, v in net.state_dict().items() if not k.endswith("num_batches_tracked")}


# pool3 features of the hand-written pool-patched torchvision network (retired) on
# _random_tf_fid_state_dict(5) and the images below, recorded at commit 39e7632 where
# test_library_inception_matches_hand_written_fid_layout compared it with torchmetrics'
# network on these inputs: max |difference| 0 (bit-identical on CPU).
_HAND_WRITTEN_ROW_SUMS = [1223.61736945773, 1192.4575875074224, 1258.9558778754435]
_HAND_WRITTEN_FIRST4 = [[0.5221691131591797, 0.23883762955665588, 0.36826324462890625, 0.11145661026239395],
                        [0.32093435525894165, 0.3619440197944641, 0.2567733824253082, 0.18693873286247253],
                        [0.8365086317062378, 0.4209265112876892, 0.2222442477941513, 0.07427434623241425]]


def test_library_fid_inception_reproduces_hand_written_features(tmp_path):
    """load_inception's TF-FID net (torchmetrics' network) gives the retired hand-written
    network's pool3 features on the same random weights and 299x299 uint8 images, and the
    torchvision layout (TF pooling missing) does not: the comparison can fail."""
    path = tmp_path / "pt_inception-2015-12-05-random.pth"
    torch.save(_random_tf_fid_state_dict(5), path)
    net = pretrained_nets.load_inception(path)
    assert isinstance(net, pretrained_nets.FIDInceptionFeatureNet)
    imgs = torch.randint(0, 256, (3, 3, 299, 299), dtype=torch.uint8,
                         generator=torch.Generator().manual_seed(6))
    f, p = features.features_and_probs(net, imgs.numpy(), batch_size=2)
    assert f.shape == (3, 2048) and p.shape == (3, 1008)
    np.testing.assert_allclose(f.sum(1), _HAND_WRITTEN_ROW_SUMS, rtol=1e-5)
    np.testing.assert_allclose(f[:, :4], _HAND_WRITTEN_FIRST4, rtol=1e-4, atol=1e-6)
    # the library's own entry point on the same uint8 images: the wrapper adds nothing
    with torch.no_grad():
        direct = net.net(imgs).double().numpy()
    np.testing.assert_array_equal(f, direct)
    logits = torch.from_numpy(f).float() @ net.net.fc.weight.T  # torch-fidelity's logits_unbiased
    np.testing.assert_allclose(p, torch.softmax(logits.double(), 1).numpy(), rtol=1e-5, atol=1e-9)
    f_tv = features.extract_features(pretrained_nets.load_inception(path, layout="torchvision"), imgs.numpy())
    assert np.abs(f_tv.sum(1) - _HAND_WRITTEN_ROW_SUMS).max() > 1.0


def test_every_training_loop_builds_its_optimizer_with_the_one_helper():
    """AdamW is made in one place (oracle.devices.adamw: the fused kernel where torch has one);
    no module of oracle/ builds its own, the feature net's loop included."""
    import re
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    own = [str(p.relative_to(repo)) for p in sorted((repo / "oracle").rglob("*.py"))
           if p.name != "devices.py" and re.search(r"optim\.AdamW\(|optim\.Adam\(", p.read_text())]
    assert own == []
