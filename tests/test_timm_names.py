"""timm's model names read once per installed timm (oracle.classifiers.timm_names): the cache
holds exactly what timm builds, and the config check of every Snakemake invocation no longer
imports timm (about 6 s of CPU each: a dry run of the smoke config took 9.3 s of CPU before, 3.0
after)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import timm

from oracle.classifiers import timm_names

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("ORACLE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_the_cached_names_are_what_timm_builds(cache):
    assert not timm_names.cache_file().exists()
    names = timm_names.model_names()
    assert timm_names.cache_file().is_file() and timm_names.cache_file().parent == cache
    assert timm_names.model_names() == names  # now read from the file
    assert set(timm.list_models()) <= names
    assert all(timm.is_model(n) for n in names)
    from timm.models import get_deprecated_models

    assert set(get_deprecated_models()) <= names  # deprecated aliases still build
    for name in ["resnet18", "resnet18.a1_in1k", "vit_base_patch16_224", "test_resnet", "resnett18", "resnet18x",
                 "", "resnet18 "]:
        assert timm_names.is_model(name) == timm.is_model(name), name


def test_another_timm_reads_its_own_names(cache, monkeypatch):
    timm_names.model_names()
    first = timm_names.cache_file()
    monkeypatch.setattr(timm_names, "_installed_timm", lambda: ("0.0.1", "/elsewhere/timm"))
    assert timm_names.cache_file() != first
    monkeypatch.setattr(timm_names, "names_from_timm", lambda: frozenset({"only_model"}))
    assert timm_names.model_names() == {"only_model"} and not timm_names.is_model("resnet18")
    assert first.is_file()


def test_an_empty_or_unwritable_cache_falls_back_to_timm(tmp_path, cache, monkeypatch):
    timm_names.model_names()
    timm_names.cache_file().write_text("")  # e.g. a disk that filled up under an old writer
    assert timm_names.is_model("resnet18")
    assert "resnet18" in timm_names.cache_file().read_text().split()
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("ORACLE_CACHE_DIR", str(tmp_path / "file" / "cache"))  # cannot be a folder
    assert timm_names.is_model("resnet18") and not timm_names.is_model("resnett18")


def test_the_config_check_imports_timm_once_per_installed_timm(cache):
    """The check every Snakemake invocation runs (the Snakefile's main process): a first
    process reads the names from timm, the next one from the cache, without importing timm;
    a misspelled name still fails with its suggestions."""
    code = ("import sys\n"
            "from oracle.workflow.plan import config as oc\n"
            f"cfg = oc.effective_config({str(REPO / 'config.yaml')!r})\n"
            "oc.check_classifier_archs(cfg)\n"
            "print('timm' in sys.modules, 'torch' in sys.modules)\n"
            "cfg['classifiers']['archs']['test_resnet']['model'] = 'test_resnett'\n"
            "try:\n    oc.check_classifier_archs(cfg)\nexcept Exception as exc:\n    print(exc)\n")
    env = {**os.environ, "ORACLE_CACHE_DIR": str(cache)}
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO,
                           timeout=300) for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr[-2000:]
    assert runs[0].stdout.splitlines()[0] == "True True"  # read from timm
    assert runs[1].stdout.splitlines()[0] == "False False"  # from the cache: neither timm nor torch
    for run in runs:
        assert "'test_resnett' is not a timm model name; similar timm names: test_resnet" in run.stdout
