"""The data route every paper preset documents works: the preset's data stage, run by the
workflow on small fake files in the layout the README gives, writes data/{train,test}.h5.

(ImageNet-64 is read as distributed, `train_data_batch_*.npz` + `val_data.npz`; AFHQ and
ImageNet-128 as class folders.) The runs are marked slow: each preset is one Snakemake run of
its data rule. The data stage also checks every world's prior against the class count it
reads, before any flow trains.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml
from fake_inputs import FAKES  # test support shared with scripts/ci/rehearse.py

REPO = Path(__file__).resolve().parents[1]

SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))


def test_every_preset_that_reads_data_has_a_fake_layout():
    """A new preset cannot skip the test below: every preset whose world is a flow reads data
    from local files, unless it uses scikit-learn's bundled digits (cpu-study, like the default)."""
    def reads_files(cfg: dict) -> bool:
        return ((cfg.get("oracle") or {}).get("world", "flow") == "flow"
                and (cfg.get("data") or {}).get("kind") != "digits")
    reads = {p.stem for p in (REPO / "presets").glob("*.yaml") if reads_files(yaml.safe_load(p.read_text()))}
    assert reads == set(FAKES)


def _data_stage(tmp_path: Path, cfg: dict, target: str) -> subprocess.CompletedProcess:
    configfile = tmp_path / "c.yaml"
    configfile.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return subprocess.run([SNAKEMAKE, "-s", str(REPO / "Snakefile"), "-d", str(tmp_path), "--cores", "1", target,
                           "--configfile", str(configfile)], cwd=tmp_path, capture_output=True, text=True, check=False,
                          timeout=600, env={**os.environ, "PYTHONUNBUFFERED": "1"})


@pytest.mark.slow
@pytest.mark.parametrize("preset", sorted(FAKES))
def test_the_data_stage_of_every_preset_reads_its_documented_layout(preset, tmp_path, place_pretrained):
    cfg = yaml.safe_load((REPO / "presets" / f"{preset}.yaml").read_text())
    place_pretrained(cfg, tmp_path)  # local weights are checked when the config is read
    root = tmp_path / "raw"
    FAKES[preset](root)
    cfg["data"]["root"] = str(root)
    proc = _data_stage(tmp_path, cfg, f"results/{cfg['run']}/data/train.h5")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    side = cfg["data"]["image_size"]
    for split in ("train", "test"):
        with h5py.File(tmp_path / "results" / cfg["run"] / "data" / f"{split}.h5", "r") as f:
            num_classes = int(f.attrs["num_classes"])
            images = f["images"]
            assert images.dtype == np.uint8 and images.shape[1:] == (3, side, side), (split, images.shape)
            assert images.shape[0] > 0
    assert num_classes == {"afhq256": 3, "imagenet64": 1000, "imagenet128": 2}[preset]


@pytest.mark.slow
def test_a_prior_of_the_wrong_length_stops_the_data_stage_before_the_flow_trains(tmp_path):
    """The digits data have 10 classes, known only once read: a 2-entry prior passes the
    config check and is refused by the data job in one line naming the key, so no flow is
    trained on a world that would fail hours later."""
    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    cfg["worlds"]["base"]["prior"] = [0.5, 0.5]
    proc = _data_stage(tmp_path, cfg, f"results/{cfg['run']}/oracle/flow.pt")
    assert proc.returncode != 0
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith("ConfigError:")]
    assert lines and "'worlds.base.prior'" in lines[0] and "the digits data has 10" in lines[0], \
        proc.stdout[-3000:] + proc.stderr[-3000:]
    run = tmp_path / "results" / cfg["run"]
    assert not (run / "data" / "train.h5").exists() and not (run / "logs" / "oracle_train.log").exists()
