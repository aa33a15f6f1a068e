"""Shared test settings."""

import dataclasses
import os
import re
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
import yaml
from _pytest.nodeid import coerce_node_id
from threadpoolctl import threadpool_limits

# a figure that does not print cleanly fails a test (a run writes it with a warning instead:
# oracle.report.figures.save_figure); the workflow runs of the tests inherit it
os.environ.setdefault("ORACLE_STRICT_FIGURES", "1")

# the fake inputs of scripts/ci/fake_inputs.py (random weights, preset data layouts)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts" / "ci"))


# ----------------------------------------------------------------------------- time per file


def pytest_addoption(parser):
    parser.addoption("--file-durations", type=int, default=None, metavar="N",
                     help="print the N test files that took longest, setup, call and teardown summed "
                          "(a session fixture counts for the file of the first test that asked for it); "
                          "0: every file")


_FILE_SECONDS: dict[str, float] = {}


def pytest_runtest_logreport(report):
    path = report.nodeid.split("::")[0]
    _FILE_SECONDS[path] = _FILE_SECONDS.get(path, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter, config):
    n = config.getoption("--file-durations")
    if n is None or not _FILE_SECONDS:
        return
    ranked = sorted(_FILE_SECONDS.items(), key=lambda kv: -kv[1])
    terminalreporter.write_sep("=", f"time per test file ({'all' if n == 0 else f'slowest {n}'}, "
                                    f"{sum(_FILE_SECONDS.values()):.0f} s in all)")
    for path, seconds in ranked[:n or None]:
        terminalreporter.write_line(f"{seconds:9.1f}s  {path}")


# ----------------------------------------------------------------------------- two workers (pytest-xdist)

#: The session fixtures whose one run many test files read (`make test` runs the suite in two
#: pytest-xdist workers, each with its own session): every file that asks for one of them runs in
#: the same worker, so each of these runs happens once per session, as without xdist.
SHARED_RUNS = ("smoke_run", "smoke_slurm_run", "smoke_second_run", "slurm_cluster", "gaussian_smoke",
               "dag_dry_run")
#: The xdist group of the files that read a shared run (`xdist_group`, `--dist loadgroup`).
SHARED_GROUP = "shared-runs"


def _file(item) -> str:
    return item.nodeid.split("::")[0]


def _xdist_groups(items) -> dict[str, str | None]:
    """{test file: its xdist group}: SHARED_GROUP for a file any of whose tests asks for a
    `SHARED_RUNS` fixture; the file itself for one with a module- or class-scoped fixture (it then
    runs once, in one worker); None (each test a unit of its own) for every other file."""
    shared = {_file(item) for item in items if set(SHARED_RUNS) & set(item.fixturenames)}
    scoped = {_file(item) for item in items
              for defs in item._fixtureinfo.name2fixturedefs.values() for d in defs
              if d.scope in ("module", "class", "package")}
    files = {_file(item) for item in items}
    return {f: SHARED_GROUP if f in shared else f if f in scoped else None for f in files}


@pytest.hookimpl(tryfirst=True)  # before xdist's worker reads the groups into the test ids
def pytest_collection_modifyitems(config, items):
    """In a pytest-xdist worker under `--dist loadgroup` (`make test`): the files that read a shared
    run are one unit of work, a file with module fixtures is one unit, any other test is a unit of
    its own; the units that hold slow tests go first, the shared one first of all (the longest:
    the other worker takes the rest meanwhile; `--no-loadscope-reorder` keeps this order, so that
    the long tests do not start last and leave one worker idle at the end). In any other session
    nothing changes, not even the order."""
    if not getattr(config.option, "loadgroup", False):
        return
    groups = _xdist_groups(items)

    def unit(item) -> str:
        return groups[_file(item)] or item.nodeid

    slow = {unit(item) for item in items if item.get_closest_marker("slow")}
    for item in items:
        if group := groups[_file(item)]:
            item.add_marker(pytest.mark.xdist_group(group))
            # what xdist's worker does with the mark, written where pytest 9 keeps the test's id:
            # xdist 3.8 writes `item._nodeid`, which pytest 9 no longer reads, so its groups are
            # lost and the shared runs ran once in each worker. The controller splits the
            # group off at the last "@" (xdist.scheduler.loadgroup).
            item._id = coerce_node_id(f"{item.nodeid}@{group}")
    # stable: within a unit the tests keep their order
    items.sort(key=lambda item: (unit(item) != SHARED_GROUP, unit(item) not in slow))


@pytest.fixture(autouse=True, scope="session")
def one_thread():
    """The test models are tiny: one torch/BLAS thread is faster than two, and on a shared
    2-core machine two intra-op threads competing with other processes run many times slower.
    End-to-end tests run Snakemake in subprocesses, which set their own thread counts."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    with threadpool_limits(1):
        yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def _random_timm_weights(tmp_path_factory):
    """model name -> a file holding a randomly initialised timm state dict of that model."""
    cache = {}

    def get(model: str):
        if model not in cache:
            from fake_inputs import random_timm

            path = tmp_path_factory.mktemp("weights") / f"{model}.pth"
            random_timm(model, path)
            cache[model] = path
        return cache[model]

    return get


def _place(cfg: dict, workdir, weights) -> None:
    """Symlink `weights(model)` at every relative ``classifiers.archs.<arch>.pretrained`` of `cfg`."""
    import os

    for name, arch in cfg["classifiers"]["archs"].items():
        pre = arch.get("pretrained")
        if isinstance(pre, str) and not Path(pre).is_absolute():
            dest = Path(workdir) / pre
            dest.parent.mkdir(parents=True, exist_ok=True)
            if not dest.exists():
                os.symlink(weights(arch.get("model", name)), dest)


@pytest.fixture(scope="session")
def place_pretrained(_random_timm_weights):
    """``place(cfg, workdir)``: put a random-weight state dict of the right architecture at
    every relative ``classifiers.archs.<arch>.pretrained`` file of ``cfg`` under ``workdir``.
    The workflow refuses a config whose weights file is missing (a paper preset names its
    ImageNet-1K ResNet-50), so a dry run without data still needs the file."""

    def place(cfg: dict, workdir) -> None:
        _place(cfg, workdir, _random_timm_weights)

    return place


# ----------------------------------------------------------------------------- one DAG per config

REPO = Path(__file__).resolve().parents[1]
#: Every config the DAG tests dry-run: name -> file (None: the embedded default, config.yaml).
DAG_CONFIGS = {"default": None,
               **{p.stem: p for p in sorted((REPO / "presets").glob("*.yaml"))},
               **{f"smoke/{p.stem}": p for p in sorted((REPO / "tests" / "smoke").glob("*.yaml"))}}


@dataclasses.dataclass(frozen=True)
class DryRun:
    """One `snakemake --profile slurm --dry-run all <every paper id>` of a config, verbose."""

    config: dict  # the config file as written (no schema defaults)
    workdir: Path  # where it ran: nothing but the random pretrained weights it placed
    out: str  # stdout and stderr: the job stats table, then every job and group job

    def job_counts(self) -> dict[str, int]:
        """{rule: jobs} of the job stats table."""
        block = self.out.split("Job stats:")[1].split("total")[0]
        return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", block, re.M)}

    def job_inputs(self, rule: str) -> list[list[str]]:
        """The input files of every job of `rule`, one list per job."""
        blocks = re.findall(rf"^\s*rule {re.escape(rule)}:\n((?:\s+\w+: .*\n)+)", self.out, re.M)
        return [next((ln.split(": ", 1)[1].split(", ") for ln in b.splitlines() if ln.strip().startswith("input:")), [])
                for b in blocks]


def _dry_run(path: Path | None, cfg: dict, workdir: Path) -> DryRun:
    cmd = [sys.executable, "-m", "snakemake", "--cores", "all", "--profile", "slurm", "--directory", str(workdir),
           "--dry-run", "all", *(cfg.get("paper") or {}), *(["--configfile", str(path)] if path else [])]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return DryRun(cfg, workdir, proc.stdout + proc.stderr)


@pytest.fixture(scope="session")
def dag_dry_run(tmp_path_factory, _random_timm_weights):
    """``get(name) -> DryRun`` of a `DAG_CONFIGS` name, run once per test session: Snakemake's
    start-up, the config checks (timm) and the DAG of a preset take 8-17 s, and the DAG tests of
    tests/test_config.py, tests/test_slurm.py and tests/test_paper_map.py all read the same DAG.
    Through the SLURM profile (from the repository root, where `--profile slurm` resolves), with
    the default target and every paper id as targets, in a working directory with no data.

    The first call starts the dry runs of every config, two at a time (each is one busy process,
    and pytest runs one test at a time: the second core would idle), the asked one first; a
    session that ends before it needs the rest drops those not yet started."""
    pool = ThreadPoolExecutor(max_workers=2)
    runs: dict[str, Future] = {}

    def start(name: str) -> None:
        if name not in runs:
            path = DAG_CONFIGS[name]
            cfg = yaml.safe_load((path or REPO / "config.yaml").read_text())
            workdir = tmp_path_factory.mktemp("dag")
            _place(cfg, workdir, _random_timm_weights)  # local weights are checked when the config is read
            runs[name] = pool.submit(_dry_run, path, cfg, workdir)

    def get(name: str) -> DryRun:
        for other in (name, *DAG_CONFIGS):
            start(other)
        return runs[name].result()

    yield get
    pool.shutdown(wait=True, cancel_futures=True)


# ----------------------------------------------------------------------------- the shared smoke run


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory):
    """The one smoke run of the session (tests/smoke_session.py, `smoke_config`): the workflow,
    provenance, integrity and SLURM tests all read it; a test that changes files copies it."""
    from smoke_session import run_locally, smoke_config

    return run_locally(tmp_path_factory.mktemp("smoke"), smoke_config())


@pytest.fixture(scope="session")
def gaussian_smoke(tmp_path_factory) -> Path:
    """results/<run> of the session's one run of tests/smoke/gaussian.yaml (the analytic world, no
    data or flow stage: about 40 jobs). The Gaussian-world checks, the report in Chromium and the
    paper PDF read it (one run, not one per module); `snakemake paper` adds its PDF, nothing else
    changes it."""
    config = REPO / "tests" / "smoke" / "gaussian.yaml"
    work = tmp_path_factory.mktemp("gaussian-smoke")
    proc = subprocess.run([str(Path(sys.executable).with_name("snakemake")), "-s", str(REPO / "Snakefile"), "-d",
                           str(work), "--cores", "2", "--configfile", str(config)], cwd=work, capture_output=True,
                          text=True, timeout=1800, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return work / "results" / yaml.safe_load(config.read_text())["run"]


@pytest.fixture(scope="session")
def slurm_cluster():
    """The one-node cluster of scripts/ci: reused if already up, else started and, at the end
    of the session, stopped; skips where it cannot run (fails under ORACLE_REQUIRE_SLURM=1)."""
    from smoke_session import start_cluster, stop_cluster

    started = start_cluster()
    try:
        yield
    finally:
        if started:
            stop_cluster()


#: The session fixtures that read the run of the smoke config through SLURM.
_SLURM_RUN_USERS = ("smoke_slurm_run", "smoke_second_run")


@pytest.fixture(scope="session")
def _slurm_run_in_background():
    """{"smoke": the SlurmRunInBackground of the smoke config}, once started; stopped at the end."""
    runs = {}
    yield runs
    for run in runs.values():
        run.stop()


@pytest.fixture(autouse=True)
def _start_slurm_run_early(request, _slurm_run_in_background, tmp_path_factory):
    """When a selected test reads the smoke run through SLURM, start that run at this process's
    first test (under xdist: its first test of the shared runs' group, the worker that will read
    it): it spends most of its time waiting on the scheduler and on each job's start-up of
    Snakemake (about 7 min on the idle 2-core machine, a few CPU-seconds at a time), so the tests
    before it run meanwhile. Where SLURM cannot run, nothing starts here and `smoke_slurm_run`
    says why."""
    session = request.session
    if getattr(session, "_slurm_start_decided", False):
        return
    if getattr(request.config.option, "loadgroup", False):
        marks = [m.args[0] for m in request.node.iter_markers("xdist_group")]
        if SHARED_GROUP not in marks:
            return  # another worker's to start, or this worker's later
    session._slurm_start_decided = True
    if not any(set(_SLURM_RUN_USERS) & set(item.fixturenames) for item in session.items):
        return
    from smoke_session import SlurmRunInBackground, smoke_config

    try:
        request.getfixturevalue("slurm_cluster")
    except (pytest.skip.Exception, pytest.fail.Exception):
        return  # cached: smoke_slurm_run asks again and skips or fails with the reason
    _slurm_run_in_background.setdefault(
        "smoke", SlurmRunInBackground(tmp_path_factory.mktemp("smoke-slurm") / "work", smoke_config()))


@pytest.fixture(scope="session")
def smoke_slurm_run(slurm_cluster, _slurm_run_in_background, tmp_path_factory):
    """The shared smoke run's config run again through `--profile slurm` on the test cluster
    (started at the first test that could read it, see `_start_slurm_run_early`)."""
    from smoke_session import SlurmRunInBackground, smoke_config

    run = _slurm_run_in_background.get("smoke")
    if run is None:  # a session that selected no test of it at the start (pytest's -k, --lf ...)
        run = SlurmRunInBackground(tmp_path_factory.mktemp("smoke-slurm") / "work", smoke_config())
        _slurm_run_in_background["smoke"] = run
    return run.result()


@pytest.fixture(scope="session")
def smoke_second_run(request, smoke_run, tmp_path_factory):
    """The shared smoke run's config run a second time: the SLURM run where the test cluster runs
    (tests/test_slurm.py compares the two number by number), else a second local run."""
    from smoke_session import run_locally

    try:
        return request.getfixturevalue("smoke_slurm_run")
    except pytest.skip.Exception:
        return run_locally(tmp_path_factory.mktemp("smoke-again"), smoke_run.config)
