"""oracle.io.data_sets: the one table of what is known of a data set before it is read (the
loaders' layouts, native shapes and classes; the paper presets' sizes), read by the data loaders,
the disk estimate and the GPU cost alike."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from oracle.io.data_sets import DATA_SETS, KINDS, kind_facts, layout, preset_data_set
from oracle.io.yaml_text import parse_yaml

REPO = Path(__file__).resolve().parents[1]


def test_the_schema_offers_exactly_the_kinds_of_the_table():
    schema = parse_yaml((REPO / "config.schema.yaml").read_text())
    assert schema["properties"]["data"]["properties"]["kind"]["enum"] == list(KINDS)


def test_every_kind_names_its_layout_and_every_preset_row_its_kind_and_size():
    assert all(layout(kind) for kind in KINDS)
    presets = {name: row for name, row in DATA_SETS.items() if name not in KINDS}
    assert set(presets) == {"afhq256", "imagenet64", "imagenet128"}
    for name, row in presets.items():
        config = parse_yaml((REPO / "presets" / f"{name}.yaml").read_text())
        assert config["run"] == name and config["data"]["kind"] == row.kind
        assert row.n_train and row.num_classes and row.channels and row.source
        assert preset_data_set(name) == row
    assert preset_data_set("cifar10") is None and preset_data_set(None) is None
    with pytest.raises(KeyError):
        kind_facts("afhq256")  # a preset's data set is not a loader


def data_kind_tables(root: Path = REPO) -> list[str]:
    """'file:line' of every dict display in oracle/ keyed by three or more data kinds: a second
    table of data-set facts (a loader telling two of its kinds apart is not one)."""
    found = []
    for path in sorted((root / "oracle").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Dict):
                keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
                if len(keys & set(KINDS)) >= 3:
                    found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_one_table_of_data_set_facts(tmp_path):
    assert [place.split(":")[0] for place in data_kind_tables()] == ["oracle/io/data_sets.py"]
    (tmp_path / "oracle").mkdir()
    (tmp_path / "oracle" / "disk.py").write_text('SHAPES = {"mnist": (1, 28), "svhn": (3, 32), "cifar10": (3, 32)}\n')
    assert data_kind_tables(tmp_path) == ["oracle/disk.py:1"]
