"""Put a randomly initialised timm state dict at every relative ``classifiers.archs.<arch>.pretrained``
file of a config, under a working directory, so a dry run of a preset that names user-supplied
weights (afhq256's ImageNet-1K ResNet-50) builds its DAG where no weights exist. For counting
jobs only: the files are random, never weights to train from (scripts/ci/fake_inputs.py).

    python scripts/ci/place_pretrained.py CONFIG.yaml WORKDIR
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fake_inputs import place_pretrained


def main(config: str, workdir: str) -> None:
    place_pretrained(yaml.safe_load(Path(config).read_text()), Path(workdir))


if __name__ == "__main__":
    main(*sys.argv[1:3])
