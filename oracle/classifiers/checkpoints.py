"""Trained classifiers on disk: ``model.pt`` holds the arguments of `build_classifier` and the
state dict, so a model can be predicted on any evaluation set later, in another process."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from oracle.classifiers.build import ImageClassifier, build_classifier
from oracle.errors import DataError
from oracle.io.atomic import torch_save_atomic
from oracle.io.state_dicts import read_checkpoint

FORMAT = "oracle-classifier/1"


def save_model(path: str | os.PathLike, model: ImageClassifier, meta: dict | None = None) -> Path:
    """Write `model` (its `spec` and CPU state dict) and `meta` (JSON-like) to `path` atomically."""
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    return torch_save_atomic({"format": FORMAT, "spec": dict(model.spec), "state_dict": state,
                              "meta": dict(meta or {})}, path)


def load_model(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> tuple[ImageClassifier, dict]:
    """The model saved by `save_model` (in eval mode) and its meta. The backbone is rebuilt
    from the stored spec without reading any pretrained file: the state dict holds every
    weight. DataError naming the file when it is missing, truncated or not a classifier."""
    p = Path(path)
    if not p.is_file():
        raise DataError(f"classifier checkpoint {p} does not exist; rerun its train_classifier job")
    blob = read_checkpoint(p, "classifier checkpoint")
    if not isinstance(blob, dict) or blob.get("format") != FORMAT:
        raise DataError(f"{p} is not a classifier checkpoint of format {FORMAT}")
    try:
        spec = dict(blob["spec"])
        model = build_classifier(spec["arch"], spec["num_classes"], spec["in_chans"], spec["img_size"],
                                 spec["input_size"], None, mean=spec["mean"], std=spec["std"],
                                 model_kwargs=spec["model_kwargs"])
        model.load_state_dict(blob["state_dict"], strict=True)
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:  # ConfigError is a ValueError
        why = " ".join(str(exc).split())[:300]  # load_state_dict reports over several lines
        raise DataError(f"classifier checkpoint {p} does not rebuild with this code ({type(exc).__name__}: {why}); "
                        "delete it and rerun its train_classifier job") from None
    model.spec = spec  # keeps the pretrained path the weights came from
    return model.to(map_location).eval(), dict(blob.get("meta") or {})
