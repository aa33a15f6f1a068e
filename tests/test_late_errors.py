"""Errors that used to come late or not at all (issue 19.5): each input below now fails with one
line naming the key or file before any job runs, or is read as what it means."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from oracle.errors import ConfigError, DataError
from oracle.io.image_folders import check_jpeg_stream, decode_image
from oracle.workflow.plan import config as oc

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "config.schema.yaml"
DEFAULT = REPO / "config.yaml"
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))


@pytest.fixture
def default() -> dict:
    return yaml.safe_load(DEFAULT.read_text())


def _active_only_arch(cfg: dict, model: str) -> dict:
    """`cfg` with an architecture that only the active experiments use."""
    cfg["classifiers"]["archs"]["only_active"] = {"model": model, "pretrained": False}
    active = [e for e in cfg["experiments"].values() if e["kind"] == "active"]
    assert active
    for e in active:
        e["archs"] = ["only_active"]
    return cfg


# ----------------------------------------------------------------------------- timm names, pretrained files


def test_a_misspelled_arch_used_only_by_active_learning_fails_at_config_time(default):
    cfg = _active_only_arch(default, "test_resnet")
    oc.check_classifier_archs(cfg)
    cfg["classifiers"]["archs"]["only_active"]["model"] = "test_resnett"
    with pytest.raises(ConfigError, match=r"'classifiers\.archs\.only_active\.model'.*'test_resnett' is not a timm"):
        oc.check_classifier_archs(cfg)


def _write_state_dict(path: Path, model: str) -> None:
    import timm
    import torch

    torch.save(timm.create_model(model, pretrained=False, num_classes=3).state_dict(), path)


def test_a_garbage_pretrained_file_fails_at_config_time_naming_it(default, tmp_path):
    import torch

    arch = default["classifiers"]["archs"]["test_resnet"]
    good = tmp_path / "good.pth"
    _write_state_dict(good, "test_resnet")
    arch["pretrained"] = str(good)
    oc.check_classifier_archs(default)  # a real state dict of the model passes

    garbage = tmp_path / "garbage.pth"
    garbage.write_bytes(b"this is not a checkpoint" * 100)
    arch["pretrained"] = str(garbage)
    with pytest.raises(ConfigError, match=r"'classifiers\.archs\.test_resnet\.pretrained'.*garbage\.pth.*unreadable") as e:
        oc.check_classifier_archs(default)
    assert "\n" not in str(e.value)

    other = tmp_path / "other.pth"
    torch.save({"step": torch.tensor(3)}, other)  # readable, but not this model's weights
    arch["pretrained"] = str(other)
    with pytest.raises(ConfigError, match=r"other\.pth' shares no parameter name with timm model 'test_resnet'"):
        oc.check_classifier_archs(default)


def test_the_workflow_refuses_a_garbage_pretrained_file_before_any_job(tmp_path):
    cfg = yaml.safe_load(DEFAULT.read_text())
    (tmp_path / "w.pth").write_bytes(b"\x00" * 1000)
    cfg["classifiers"]["archs"]["test_resnet"]["pretrained"] = str(tmp_path / "w.pth")
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(cfg))
    proc = subprocess.run([SNAKEMAKE, "-s", str(REPO / "Snakefile"), "-d", str(tmp_path), "-n", "--configfile", str(bad)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "'classifiers.archs.test_resnet.pretrained'" in out and "w.pth" in out, out[-2000:]


# ----------------------------------------------------------------------------- config values


def test_shift_size_error_names_the_size_key(default):
    (name,) = [n for n, e in default["experiments"].items() if e["kind"] == "shift"]
    default["experiments"][name]["size"] = 10**7
    oc.validate_config(default, SCHEMA)
    with pytest.raises(ConfigError, match=rf"config key 'experiments\.{name}\.size': N=10000000 exceeds"):
        oc.check_config(default)


def test_exponent_without_a_dot_is_a_number(default, tmp_path):
    """YAML 1.1 reads `1e-3` as a string; where the schema wants a number it is one."""
    text = DEFAULT.read_text()
    cfg_text = text.replace("lr:", "lr: 1e-3 #", 1)
    assert "lr: 1e-3" in cfg_text
    cfg = yaml.safe_load(cfg_text)
    lr_path = _find(cfg, "lr")
    assert _get(cfg, lr_path) == "1e-3"  # what PyYAML (and Snakemake) hand over
    oc.validate_config(cfg, SCHEMA)
    assert _get(cfg, lr_path) == 1e-3 and isinstance(_get(cfg, lr_path), float)
    # a string-typed key keeps its string
    cfg["run"] = "1e3"
    oc.validate_config(cfg, SCHEMA)
    assert cfg["run"] == "1e3"
    # the CLI check and the workflow accept the file
    f = tmp_path / "lr.yaml"
    f.write_text(cfg_text)
    assert oc.main([str(f)]) == 0
    proc = subprocess.run([SNAKEMAKE, "-s", str(REPO / "Snakefile"), "-d", str(tmp_path), "-n", "--quiet", "rules",
                           "--configfile", str(f)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-2000:]


def _find(obj, key, path=()):
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == key:
                return (*path, k)
            hit = _find(v, key, (*path, k))
            if hit:
                return hit
    return None


def _get(obj, path):
    for p in path:
        obj = obj[p]
    return obj


# ----------------------------------------------------------------------------- image files


def test_a_16_bit_png_is_scaled_not_clipped(tmp_path):
    from PIL import Image

    values = np.arange(0, 65536, 257, dtype=np.uint16)[:256].reshape(16, 16)  # 0, 257, ..., 65535
    path = tmp_path / "deep.png"
    Image.fromarray(values).save(path)
    with Image.open(path) as im:
        assert im.mode == "I;16"  # a real 16-bit PNG
    gray = decode_image(path, None, channels=1)
    np.testing.assert_array_equal(gray[0], (values >> 8).astype(np.uint8))
    assert gray.dtype == np.uint8 and gray.max() == 255 and len(np.unique(gray)) == 256
    rgb = decode_image(path, None, channels=3)
    np.testing.assert_array_equal(rgb, np.repeat(gray, 3, axis=0))


def test_a_32_bit_image_is_refused_naming_the_file(tmp_path):
    from PIL import Image

    path = tmp_path / "float.tif"
    Image.fromarray(np.ones((4, 4), np.float32)).save(path)
    with pytest.raises(DataError, match=r"float\.tif: mode 'F'"):
        decode_image(path, None)


def _jpeg(tmp_path: Path) -> tuple[Path, bytes]:
    from PIL import Image

    rng = np.random.default_rng(0)
    img = np.clip(np.linspace(0, 255, 64)[None, :, None] + rng.normal(0, 20, (64, 64, 3)), 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, "JPEG", quality=90)
    return tmp_path / "x.jpg", buf.getvalue()


def test_a_jpeg_with_flipped_bytes_mid_scan_raises_naming_the_file(tmp_path):
    from PIL import Image

    path, data = _jpeg(tmp_path)
    path.write_bytes(data)
    good = decode_image(path, None)
    assert check_jpeg_stream(data, path) == len(data) - 2  # the EOI marker
    sos = data.index(b"\xff\xda")
    mid = (sos + len(data)) // 2
    bad = bytearray(data)
    for i in range(mid, mid + 8):  # flip 8 bytes in the middle of the compressed data
        bad[i] ^= 0xFF
    path.write_bytes(bytes(bad))
    with Image.open(path) as im:  # what Pillow alone does: decodes it without a word
        im.load()
        assert np.abs(np.asarray(im.convert("RGB")).transpose(2, 0, 1).astype(int) - good).mean() > 5
    with pytest.raises(DataError, match=r"corrupt JPEG .*x\.jpg: .*extraneous bytes") as e:
        decode_image(path, None)
    assert "\n" not in str(e.value)


def test_a_truncated_jpeg_and_restart_markers_out_of_order_are_refused(tmp_path):
    path, data = _jpeg(tmp_path)
    path.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(DataError, match=r"x\.jpg"):
        decode_image(path, None)
    sos = data.index(b"\xff\xda")
    mid = (sos + len(data)) // 2
    with pytest.raises(DataError, match=r"restart marker RST3 at offset .* where RST0 belongs"):
        check_jpeg_stream(data[:mid] + b"\xff\xd3" + data[mid:], path)
    # trailing bytes after EOI (camera trailers) are fine
    check_jpeg_stream(data + b"trailer", path)
