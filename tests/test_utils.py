import json
import random

import numpy as np
import pytest

from icml26.errors import InputError
from icml26.runner import RunConfig
from icml26.utils import atomic_write_json, atomic_write_text, inner_seed, set_seed


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


def test_inner_seed_is_the_seed_sequence_draw_and_separates_seeds_and_streams():
    assert inner_seed(0, 3, 1) == int(np.random.SeedSequence((0, 3, 1)).generate_state(1)[0])
    assert inner_seed(5, 2, bits=31) == inner_seed(5, 2) % 2**31 < 2**31
    assert inner_seed(np.int64(1), np.int64(2)) == inner_seed(1, 2)
    # seed + i would make seed 1's stream 0 equal seed 0's stream 1; the sequence does not
    draws = {inner_seed(s, i) for s in range(3) for i in range(50)}
    assert len(draws) == 150


@pytest.mark.parametrize("args, kwargs, argument", [((-1,), {}, "seed"), ((True,), {}, "seed"), ((0, -2), {}, "stream"),
                                                    ((0, 1.5), {}, "stream"), ((0,), {"bits": 16}, "bits")])
def test_inner_seed_refuses_bad_input(args, kwargs, argument):
    with pytest.raises(InputError, match=f"inner_seed: {argument}: expected"):
        inner_seed(*args, **kwargs)
