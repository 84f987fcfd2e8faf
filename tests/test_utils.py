import json
import random

import numpy as np
import pytest

from icml26.runner import RunConfig
from icml26.utils import atomic_write_json, atomic_write_text, set_seed


def _draw():
    import torch

    return random.random(), float(np.random.rand()), float(torch.rand(1))


def test_set_seed_seeds_python_numpy_and_torch():
    set_seed(3)
    first = _draw()
    set_seed(3)
    assert _draw() == first
    set_seed(4)
    assert _draw() != first


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True])
def test_set_seed_rejects_bad_seeds(bad):
    with pytest.raises(ValueError, match="seed"):
        set_seed(bad)


def test_atomic_write_replaces_whole_file_and_leaves_no_temp(tmp_path):
    target = tmp_path / "sub" / "results.json"
    atomic_write_json(target, {"a": 1})
    atomic_write_json(target, {"a": 2})
    assert json.loads(target.read_text()) == {"a": 2}
    assert sorted(p.name for p in target.parent.iterdir()) == ["results.json"]


def test_atomic_write_keeps_old_content_when_serialisation_fails(tmp_path):
    target = tmp_path / "results.json"
    atomic_write_text(target, "old")
    with pytest.raises(ValueError):
        atomic_write_json(target, {"x": float("nan")})  # strict JSON refuses NaN before writing
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]


def test_run_config_validates_and_resolves_device(tmp_path):
    config = RunConfig(mode="full", seeds=[0, 1], out_dir=str(tmp_path), device="cpu")
    assert config.seeds == (0, 1) and not config.quick and config.out_dir == tmp_path
    assert config.torch_device().type == "cpu"
    with pytest.raises(ValueError, match="mode"):
        RunConfig(mode="fast")
    with pytest.raises(ValueError, match="seeds"):
        RunConfig(seeds=())
