"""Flow files: building a flow from its spec, saving and loading the oracle's own flow files,
importing the public TarFlow release's state dicts, and checking a checkpoint's class count
against the data."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor, nn

from oracle.errors import ConfigError, DataError, OracleError, WorldError
from oracle.flows import PerClassFlows, TarFlow, _as_hw
from oracle.io.atomic import torch_save_atomic
from oracle.io.state_dicts import read_checkpoint, read_state_dict

FLOW_FORMAT = "oracle-flow"
FLOW_FORMAT_VERSION = 1
#: Where the public release's training scripts nest the weights they save.
PUBLIC_NESTING = ("model", "state_dict", "ema")


# --------------------------------------------------------------------------------------------
# Specs, files
# --------------------------------------------------------------------------------------------

_REQUIRED = ("in_channels", "img_size", "patch_size", "channels", "num_blocks", "layers_per_block")
_OPTIONAL = {"num_classes": 0, "per_class": False, "nvp": True, "head_dim": 64, "expansion": 4}


def normalize_spec(spec: dict) -> dict:
    """Validate a flow spec and fill defaults. Raises ConfigError naming the key."""
    if not isinstance(spec, dict):
        raise ConfigError(f"flow spec must be a mapping, got {type(spec).__name__}")
    unknown = sorted(set(spec) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        raise ConfigError(f"flow spec: unknown key(s) {unknown}; expected {list(_REQUIRED) + list(_OPTIONAL)}")
    missing = [k for k in _REQUIRED if k not in spec]
    if missing:
        raise ConfigError(f"flow spec: missing key(s) {missing}")
    out = {**_OPTIONAL, **spec}
    img = out["img_size"]
    out["img_size"] = int(img) if isinstance(img, int) else list(_as_hw(img))
    for k in ("in_channels", "patch_size", "channels", "num_blocks", "layers_per_block",
              "num_classes", "head_dim", "expansion"):
        if not isinstance(out[k], int) or isinstance(out[k], bool):
            raise ConfigError(f"flow spec: {k}={out[k]!r}: expected an integer")
    for k in ("per_class", "nvp"):
        if not isinstance(out[k], bool):
            raise ConfigError(f"flow spec: {k}={out[k]!r}: expected true/false")
    if out["per_class"] and out["num_classes"] < 1:
        raise ConfigError("flow spec: per_class=true needs num_classes >= 1")
    return out


def build_flow(spec: dict, seed: int | None = None) -> TarFlow | PerClassFlows:
    """A fresh flow from a spec (keys: in_channels, img_size, patch_size, channels, num_blocks,
    layers_per_block, num_classes=0, per_class=False, nvp=True, head_dim=64, expansion=4).

    `seed` makes the initialisation a function of the seed without touching global RNG state.
    """
    s = normalize_spec(spec)
    img = s["img_size"] if isinstance(s["img_size"], int) else tuple(s["img_size"])
    kw = dict(in_channels=s["in_channels"], img_size=img, patch_size=s["patch_size"],
              channels=s["channels"], num_blocks=s["num_blocks"],
              layers_per_block=s["layers_per_block"], nvp=s["nvp"], head_dim=s["head_dim"],
              expansion=s["expansion"])

    def make() -> TarFlow | PerClassFlows:
        if s["per_class"]:
            return PerClassFlows([TarFlow(num_classes=0, **kw) for _ in range(s["num_classes"])])
        return TarFlow(num_classes=s["num_classes"], **kw)

    if seed is None:
        return make()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        return make()


def random_flow(spec: dict, seed: int = 0) -> TarFlow | PerClassFlows:
    """`build_flow(spec, seed)` with its zero-initialised output projections (``proj_out``)
    drawn as N(0, 0.02^2), so the flow is not the identity: a stand-in for trained weights in
    benchmarks and checks, which need a generic flow of a given shape."""
    flow = build_flow(spec, seed=seed)
    gen = torch.Generator().manual_seed(int(seed))
    with torch.no_grad():
        for name, p in flow.named_parameters():
            if "proj_out" in name:
                p.copy_(0.02 * torch.randn(p.shape, generator=gen))
    return flow


def _state_mismatch(expected: dict[str, Tensor], got: dict[str, Tensor], limit: int = 6) -> str:
    """One line: missing keys, unexpected keys, shape mismatches ('' when they fit)."""
    missing = [k for k in expected if k not in got]
    unexpected = [k for k in got if k not in expected]
    shapes = [f"{k} file {list(got[k].shape)} vs model {list(expected[k].shape)}"
              for k in expected if k in got and tuple(got[k].shape) != tuple(expected[k].shape)]
    parts = []
    for label, items in (("missing", missing), ("unexpected", unexpected), ("shape mismatch", shapes)):
        if items:
            more = f" (+{len(items) - limit} more)" if len(items) > limit else ""
            parts.append(f"{label}: {', '.join(items[:limit])}{more}")
    return "; ".join(parts)


def save_flow(path: str | os.PathLike, model: nn.Module, spec: dict, extra: dict | None = None) -> None:
    """Write {format, spec, state_dict, extra} to `path` atomically (temp file + rename).

    Raises ConfigError when `spec` does not describe `model` (checked on the meta device).
    """
    s = normalize_spec(spec)
    with torch.device("meta"):
        ref = build_flow(s)
    sd = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    bad = _state_mismatch(ref.state_dict(), sd)
    if bad:
        raise ConfigError(f"save_flow {path}: spec does not describe the model ({bad})")
    torch_save_atomic({"format": FLOW_FORMAT, "format_version": FLOW_FORMAT_VERSION,
                       "spec": s, "state_dict": sd, "extra": extra or {}}, Path(path))


def load_flow(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> tuple[nn.Module, dict]:
    """(model in eval mode, spec) from a file written by `save_flow`."""
    path = Path(path)
    blob = read_checkpoint(path, "flow checkpoint", map_location=map_location)
    if not isinstance(blob, dict) or blob.get("format") != FLOW_FORMAT:
        raise DataError(f"{path} is not an oracle flow file (format={FLOW_FORMAT!r}); "
                        "for a public TarFlow state dict use load_public_tarflow")
    spec = normalize_spec(blob["spec"])
    model = build_flow(spec)
    bad = _state_mismatch(model.state_dict(), blob["state_dict"])
    if bad:
        raise OracleError(f"flow checkpoint {path} does not match its spec: {bad}")
    model.load_state_dict(blob["state_dict"], strict=True)
    return model.to(map_location).eval(), spec


def load_public_tarflow(path: str | os.PathLike, spec: dict) -> TarFlow:
    """A public TarFlow release checkpoint (a raw state_dict, possibly wrapped in a dict
    under 'model'/'state_dict'/'ema') loaded strictly into TarFlow(spec), float32, eval mode.

    Raises OracleError naming the file and the mismatching keys/shapes (e.g. another class count).
    """
    path = Path(path)
    s = normalize_spec(spec)
    if s["per_class"]:
        raise ConfigError("load_public_tarflow loads one TarFlow; spec has per_class=true")
    sd = read_state_dict(path, "public TarFlow checkpoint", "oracle.checkpoint", nesting=PUBLIC_NESTING)
    model = build_flow(s)
    bad = _state_mismatch(model.state_dict(), sd)
    if bad:
        raise OracleError(f"public TarFlow checkpoint {path} does not fit the spec "
                          f"(num_classes={s['num_classes']}, img_size={s['img_size']}, "
                          f"patch_size={s['patch_size']}, channels={s['channels']}): {bad}")
    model.load_state_dict(sd, strict=True)
    return model.float().eval()


# --------------------------------------------------------------------------- checkpoint checks


def checkpoint_num_classes(path: str | os.PathLike, fmt: str) -> int:
    """The class count K of a flow checkpoint, without building the model.

    ``native``: the spec stored by ``oracle.flow_checkpoints.save_flow``. ``public_tarflow``: the first
    axis of ``blocks.0.class_embed`` ([K, 1, C]); 0 for an unconditional checkpoint.
    """
    p = Path(path)
    if fmt == "native":
        blob = read_checkpoint(p, "flow checkpoint", "oracle.checkpoint")
        if not isinstance(blob, dict) or "spec" not in blob:
            raise DataError(f"flow checkpoint {p} is not an oracle flow file; set oracle.checkpoint_format: public_tarflow for a public TarFlow state dict")
        return int(blob["spec"].get("num_classes", 0))
    if fmt == "public_tarflow":
        sd = read_state_dict(p, "public TarFlow checkpoint", "oracle.checkpoint", nesting=PUBLIC_NESTING)
        embed = sd.get("blocks.0.class_embed")
        return 0 if embed is None else int(embed.shape[0])
    raise ConfigError(f"config key 'oracle.checkpoint_format': {fmt!r} is not native or public_tarflow")


def check_checkpoint_classes(path: str | os.PathLike, fmt: str, data_path: str | os.PathLike,
                             data_classes: Sequence[str]) -> None:
    """Raise WorldError when the checkpoint's class count differs from the data's."""
    k = checkpoint_num_classes(path, fmt)
    if k != len(data_classes):
        shown = ", ".join(list(data_classes)[:5]) + (", ..." if len(data_classes) > 5 else "")
        raise WorldError(
            f"flow checkpoint {path} has {k} classes but the data {data_path} have {len(data_classes)} "
            f"({shown}); use a checkpoint trained on these classes or data.classes to select them"
        )
