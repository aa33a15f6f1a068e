"""Put a randomly initialised timm state dict at every relative ``classifiers.archs.<arch>.pretrained``
file of a config, under a working directory, so a dry run of a preset that names user-supplied
weights (afhq256's ImageNet-1K ResNet-50) builds its DAG where no weights exist. For counting
jobs only: the files are random, never weights to train from.

    python scripts/ci/place_pretrained.py CONFIG.yaml WORKDIR
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml


def main(config: str, workdir: str) -> None:
    cfg = yaml.safe_load(Path(config).read_text())
    for name, arch in ((cfg.get("classifiers") or {}).get("archs") or {}).items():
        pre = (arch or {}).get("pretrained")
        if isinstance(pre, str) and not Path(pre).is_absolute():
            import timm
            import torch

            dest = Path(workdir) / pre
            dest.parent.mkdir(parents=True, exist_ok=True)
            torch.save(timm.create_model(arch.get("model", name), pretrained=False).state_dict(), dest)


if __name__ == "__main__":
    main(*sys.argv[1:3])
