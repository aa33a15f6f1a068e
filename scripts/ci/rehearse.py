"""Rehearse a paper preset end to end on CPU in miniature: the preset with its overlay
presets/rehearsal/<preset>.yaml on top (all the shrinking lives there), on fake inputs in the
preset's documented layouts (scripts/ci/fake_inputs.py), through every target and every
`paper:` id; then check that every file of every `paper:` artifact exists.

    python scripts/ci/rehearse.py PRESET [--workdir DIR] [--profile slurm] [--cores N] [-- SNAKEMAKE_ARGS...]

PRESET is a name of presets/ (afhq256, imagenet64, imagenet128). The run happens in DIR
(default: <tmp>/oracle-rehearsal/<preset>; never inside the repository), where the fake data
and random weights are placed at the relative paths the preset names; a second call reuses
them and only redoes what changed. `--profile slurm` submits the jobs through the repository's
SLURM profile; the CPU-only test cluster has no GPUs, so there the flow trains in one process
(resources.oracle.gpus 0, written to DIR/slurm-cpu.yaml as a third configfile). Arguments after
`--` go to Snakemake as they are (e.g. quicker status polling on a test cluster). Exit status 0
when everything was built; else one line naming what is missing or which step failed.
See docs/presets.md ("Rehearsal").
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO))
from fake_inputs import place_inputs

from oracle.errors import ConfigError
from oracle.workflow.plan.rehearsal import configfiles, merged_config, paper_files, snakemake_command  # noqa: F401 (tests)

#: Per preset: how much fake raw data (images per class and split, or npz rows per file).
DATA = {
    "afhq256": {"per_split": {"train": 4, "test": 2}},
    "imagenet64": {"sizes": {"train_data_batch_1.npz": 10, "train_data_batch_2.npz": 6, "val_data.npz": 6}},
    "imagenet128": {"classes": 51, "per_split": {"train": 1, "test": 1}},
}
#: The SLURM test cluster has no GPUs: a request for them would never be scheduled.
SLURM_CPU = {"resources": {"oracle": {"gpus": 0}}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("preset")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--profile", default=None, help="a Snakemake profile, e.g. slurm")
    ap.add_argument("--cores", default="2")
    argv = sys.argv[1:] if argv is None else list(argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    a = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    try:
        files = configfiles(a.preset)
    except ConfigError as exc:
        raise SystemExit(f"rehearse: {exc}") from None
    workdir = (a.workdir or Path(tempfile.gettempdir()) / "oracle-rehearsal" / a.preset).resolve()
    if workdir == REPO or REPO in workdir.parents:
        raise SystemExit(f"rehearse: --workdir {workdir} is inside the repository; pick a scratch folder")
    workdir.mkdir(parents=True, exist_ok=True)
    cfg = merged_config(files)
    if a.profile == "slurm":
        cpu_only = workdir / "slurm-cpu.yaml"
        cpu_only.write_text(yaml.safe_dump(SLURM_CPU))
        files.append(cpu_only)
        cfg = merged_config(files)
    t0 = time.time()
    placed = place_inputs(a.preset, cfg, workdir, DATA.get(a.preset))
    print(f"rehearse: {len(placed)} fake inputs placed in {workdir} ({time.time() - t0:.0f} s)", flush=True)
    cmd = snakemake_command(sys.executable, cfg, files, workdir, a.cores, a.profile, extra)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    print("rehearse:", " ".join(cmd), flush=True)
    t1 = time.time()
    rc = subprocess.run(cmd, check=False, cwd=REPO, env=env).returncode
    wall = time.time() - t1
    if rc != 0:
        print(f"rehearse: {a.preset}: snakemake exited {rc} after {wall:.0f} s (its log is above)", file=sys.stderr)
        return 1
    missing = [f"{pid}: {p.relative_to(workdir)}" for pid, ps in paper_files(cfg, workdir).items() for p in ps
               if not p.is_file()]
    if missing:
        print(f"rehearse: {a.preset}: paper artifacts missing: {'; '.join(missing)}", file=sys.stderr)
        return 1
    print(f"rehearse: {a.preset}: OK in {wall:.0f} s, {len(cfg.get('paper') or {})} paper artifacts present "
          f"({workdir})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
