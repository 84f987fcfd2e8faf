"""PhysioNet 2012 from several sources (sets A, B and C): t-PatchGNN's order and concatenation before its seeded
split, per-source parsing and caching, refused duplicates and bad input; the protocol on the real 12,000 stays
against an independent replica of t-PatchGNN's code."""

import io
import tarfile

import numpy as np
import pytest
import torch
from conftest import physionet_record_text

from icml26.errors import InputError
from icml26.eval.tasks.tfmixer import (
    default_physionet_path,
    evaluate_forecaster,
    load_physionet2012,
    physionet2012,
    physionet_rows,
    train_test_split_indices,
)
from icml26.models.tfmixer import HistoryMeanForecaster, LOCFForecaster

# Per set: (RecordID, descriptors Age, Gender, Height, ICUType, Weight (-1: unknown), rows of its own); the archive's
# members come in this order (not sorted). Urine is only in A, Lactate only in B, GCS only in C: each source's own
# names table differs, so the concatenation must remap the parameter indices.
_BASE = [("00:30", "HR", 80), ("06:00", "Temp", 37.0), ("23:00", "HR", 85), ("25:00", "HR", 90),
         ("30:00", "Temp", 36.8), ("40:00", "HR", 75)]
SETS = {
    "a": [(132547, (60, 1, 175, 2, 80), [("02:00", "Urine", 100), ("02:00", "Urine", 300), ("26:00", "Urine", 50)]),
          (132539, (54, 0, -1, 4, -1), [("28:00", "Urine", 70)]),
          (132545, (70, 0, 160, 3, 60), [])],
    "b": [(142675, (-1, -1, -1, -1, -1), [("03:00", "Lactate", 2.0), ("27:00", "Lactate", 1.5)]),
          (142671, (45, 1, 180, 1, 90), []),
          (142690, (33, 0, 165, 2, 70), [("05:00", "Lactate", 3.0)]),
          (142680, (81, 1, 170, 4, 75), [])],
    "c": [(152871, (50, 0, 150, 2, 55), [("07:00", "GCS", 15), ("31:00", "GCS", 14)]),
          (152863, (66, 1, -1, 3, 82), [])],
}


def _texts(letter):
    """``(member name, record text)`` of one set: observations before and after 24 h, values varying per record."""
    return [(f"set-{letter}/{rid}.txt", physionet_record_text(
        rid, static=static, rows=[(t, p, v + rid % 7 + k) for k, (t, p, v) in enumerate(_BASE)] + extra))
        for rid, static, extra in SETS[letter]]


def _tar(path, members):
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as archive:
        for name, text in members:
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def _folder(path, members):
    for name, text in members:
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    return path


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ICML26_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def archives(tmp_path):
    """set-a.tar.gz, set-b.tar.gz, set-c.tar.gz (members in the order of SETS, with an outcomes file in A)."""
    folder = tmp_path / "raw"
    folder.mkdir()
    outcomes = [("Outcomes-a.txt", "RecordID,SAPS-I,SOFA,Length_of_stay,Survival,In-hospital_death\n132539,6,1,5,-1,0\n")]
    return {x: _tar(folder / f"set-{x}.tar.gz", _texts(x) + (outcomes if x == "a" else [])) for x in "abc"}


def _ids(letters):
    return [str(rid) for x in letters for rid, _, _ in SETS[x]]


def _split_ids(splits):
    return {k: splits.info["split_record_ids"][k] for k in ("train", "validation", "test")}


def _assert_same_splits(one, other):
    assert _split_ids(one) == _split_ids(other)
    for key in ("center", "scale", "train_mean"):
        np.testing.assert_array_equal(one.info[key], other.info[key])
    for part in ("train", "validation", "test"):
        a, b = getattr(one, part), getattr(other, part)
        assert a.info["record_ids"] == b.info["record_ids"]
        for sa, sb in zip(a, b):
            for key in sa:
                torch.testing.assert_close(sa[key], sb[key], rtol=0, atol=0)


def test_sets_are_taken_in_tpatchgnn_order_a_b_c_whatever_the_order_given(archives):
    a, b, c = archives["a"], archives["b"], archives["c"]
    splits = load_physionet2012([c, a, b], "tpatchgnn")
    info = splits.info
    assert info["sources"] == ["set-a.tar.gz", "set-b.tar.gz", "set-c.tar.gz"] and info["records"] == 9
    ids = _ids("abc")  # data_a + data_b + data_c, each in its archive's member order
    seen, test = train_test_split_indices(9, train_size=0.8, random_state=42, shuffle=True)
    train, val = train_test_split_indices(len(seen), train_size=0.75, shuffle=False)
    assert _split_ids(splits) == {"train": [ids[i] for i in seen[train]], "validation": [ids[i] for i in seen[val]],
                                  "test": [ids[i] for i in test]}
    assert [len(v) for v in _split_ids(splits).values()] == [5, 2, 2]
    for order in ([a, b, c], (b, c, a), [str(c), str(b), a]):
        _assert_same_splits(load_physionet2012(order, "tpatchgnn"), splits)


def test_unrecognised_names_keep_the_order_given_and_other_protocols_order_their_own_way(archives, tmp_path):
    first, second = tmp_path / "icu-1.tar.gz", tmp_path / "stays.tar.gz"
    first.write_bytes(archives["c"].read_bytes())
    second.write_bytes(archives["a"].read_bytes())
    splits = load_physionet2012([first, second], "tpatchgnn")
    assert splits.info["sources"] == ["icu-1.tar.gz", "stays.tar.gz"]
    ids = _ids("ca")
    seen, test = train_test_split_indices(len(ids), train_size=0.8, random_state=42, shuffle=True)
    assert splits.info["split_record_ids"]["test"] == [ids[i] for i in test]
    # one recognised name among others: the order given
    assert load_physionet2012([archives["b"], first], "tpatchgnn").info["sources"] == ["set-b.tar.gz", "icu-1.tar.gz"]
    # apn: the sources in the order given, then its own RecordID order (unshuffled split)
    apn = load_physionet2012([archives["c"], archives["a"]], "apn")
    assert apn.info["sources"] == ["set-c.tar.gz", "set-a.tar.gz"]
    assert sum(_split_ids(apn).values(), []) == sorted(_ids("ac"), key=int)
    legacy = load_physionet2012([archives["c"], archives["a"], archives["b"]], "zscore_24h", seed=3)
    assert legacy.info["sources"] == ["set-c.tar.gz", "set-a.tar.gz", "set-b.tar.gz"]
    assert sorted(sum(_split_ids(legacy).values(), [])) == sorted(_ids("abc"))


def test_three_sources_equal_their_concatenation_done_by_hand(archives, tmp_path):
    sources = [archives[x] for x in "abc"]
    rows = physionet_rows(sources)
    parts = [physionet_rows(s) for s in sources]
    assert list(rows["record_ids"]) == _ids("abc")
    assert len(set(map(str, rows["names"]))) == len(rows["names"])  # one merged table
    for key in ("hours", "value"):
        np.testing.assert_array_equal(rows[key], np.concatenate([p[key] for p in parts]))
    np.testing.assert_array_equal(rows["names"][rows["param"]],
                                  np.concatenate([p["names"][p["param"]] for p in parts]))
    np.testing.assert_array_equal(np.diff(rows["offsets"]), np.concatenate([np.diff(p["offsets"]) for p in parts]))
    assert rows["offsets"][0] == 0 and rows["offsets"][-1] == len(rows["hours"])
    # one archive holding A's, then B's, then C's records, each in its member order: the same splits, bit for bit
    together = _tar(tmp_path / "all.tar.gz", _texts("a") + _texts("b") + _texts("c"))
    for protocol in ("tpatchgnn", "apn", "zscore_24h"):
        _assert_same_splits(load_physionet2012([archives["b"], archives["c"], archives["a"]] if protocol == "tpatchgnn"
                                               else sources, protocol), load_physionet2012(together, protocol))


def test_descriptors_are_read_as_in_one_source(archives):
    rows = physionet_rows([archives[x] for x in "abc"])
    alone = physionet_rows(archives["b"])
    i, j = _ids("abc").index("142675"), list(alone["record_ids"]).index("142675")
    sl, sm = slice(*rows["offsets"][i:i + 2]), slice(*alone["offsets"][j:j + 2])
    np.testing.assert_array_equal(rows["names"][rows["param"][sl]], alone["names"][alone["param"][sm]])
    np.testing.assert_array_equal(rows["value"][sl], alone["value"][sm])
    splits = load_physionet2012([archives[x] for x in "abc"], "tpatchgnn")
    v = list(physionet2012.PHYSIONET_VARIABLES)
    by_id = {rid: s for part in (splits.train, splits.validation, splits.test)
             for rid, s in zip(part.info["record_ids"], part)}
    unknown, info = by_id["142675"], splits.info
    for name in ("Age", "Gender", "Height", "ICUType", "Weight"):  # -1 kept as an observation at t = 0 (t-PatchGNN)
        k = v.index(name)
        assert unknown["times"][0] == 0 and unknown["mask"][0, k]
        assert float(unknown["values"][0, k]) == pytest.approx((-1 - info["center"][k]) / info["scale"][k], abs=1e-6)
    assert unknown["mask"][:, v.index("Lactate")].sum() == 1 and "RecordID" not in v
    # the earlier pipeline drops an unknown descriptor, in a concatenation as in one source
    legacy = load_physionet2012([archives[x] for x in "abc"], "zscore_24h", seed=0)
    sample = {rid: s for part in (legacy.train, legacy.validation, legacy.test)
              for rid, s in zip(part.info["record_ids"], part)}["142675"]
    assert not sample["mask"][:, v.index("Height")].any() and sample["mask"][:, v.index("Lactate")].any()


def test_a_folder_source_equals_its_archive_and_each_source_is_cached_alone(archives, tmp_path, monkeypatch):
    folder = _folder(tmp_path / "extracted", _texts("b"))
    # B's members are not in sorted order and a folder's files are read sorted: B's archive in sorted order is equal
    sorted_b = _tar(tmp_path / "sorted" / "set-b.tar.gz", sorted(_texts("b")))
    from_folder = load_physionet2012([archives["c"], folder / "set-b", archives["a"]], "tpatchgnn")
    assert from_folder.info["sources"] == ["set-a.tar.gz", "set-b", "set-c.tar.gz"]
    _assert_same_splits(from_folder, load_physionet2012([archives["a"], sorted_b, archives["c"]], "tpatchgnn"))
    cached = sorted((tmp_path / "cache" / "physionet2012").glob("*.npz"))
    assert len(cached) == 4  # A, C, B's folder, B's sorted archive: one entry per source, none for the concatenation

    def no_parse(_):
        raise AssertionError("parsed again instead of reading the cache")

    monkeypatch.setattr(physionet2012, "_parse_source", no_parse)
    np.testing.assert_array_equal(physionet_rows([archives["a"], archives["c"]])["value"],
                                  np.concatenate([physionet_rows(archives[x])["value"] for x in "ac"]))


def test_duplicates_are_refused(archives, tmp_path, monkeypatch):
    a = archives["a"]
    with pytest.raises(InputError, match=r"load_physionet2012: source: expected each archive or folder once, "
                                         r"got '.*set-a.tar.gz' twice"):
        load_physionet2012([a, archives["b"], a])
    with pytest.raises(InputError, match="expected each archive or folder once"):  # one file, spelt two ways
        physionet_rows([a, a.parent / ".." / a.parent.name / a.name])
    # the same stays twice (an archive and its extracted folder, or a copy): never kept twice
    folder = _folder(tmp_path / "extracted", _texts("a"))
    with pytest.raises(InputError, match=r"load_physionet2012: source: expected sources with distinct RecordIDs.*"
                                         r"got 3 RecordIDs in more than one source: 132547, 132539, 132545 \(in "
                                         r"set-a.tar.gz and extracted\)$"):
        load_physionet2012([a, folder, archives["c"]])
    copy = tmp_path / "copy" / "set-a.tar.gz"
    copy.parent.mkdir()
    copy.write_bytes(a.read_bytes())
    with pytest.raises(InputError, match=r"got 3 RecordIDs in more than one source: 132547, 132539, 132545 \(in "
                                         r"raw/set-a\.tar\.gz and copy/set-a\.tar\.gz\)$"):
        physionet_rows([a, copy])
    clash = _tar(tmp_path / "set-c2.tar.gz", [("x/152871.txt", physionet_record_text(152871))])
    with pytest.raises(InputError, match=r"got 1 RecordIDs in more than one source: 152871 \(in set-c.tar.gz and "
                                         r"set-c2.tar.gz\)$"):
        load_physionet2012([archives["c"], clash], "apn")


@pytest.mark.parametrize("source, expected, got", [
    ([], r"a path \(str or os\.PathLike\) or a non-empty list of paths", "an empty list"),
    ((), r"a path \(str or os\.PathLike\) or a non-empty list of paths", "an empty tuple"),
    ("ARCHIVE, 3", r"a path \(str or os\.PathLike\) or a non-empty list of paths", "int at position 1"),
    ("ARCHIVE, None", r"a path \(str or os\.PathLike\) or a non-empty list of paths", "NoneType at position 1"),
    (b"set-a.tar.gz", r"a path \(str or os\.PathLike\) or a non-empty list of paths", "bytes"),
    ({"a": "set-a.tar.gz"}, r"a path \(str or os\.PathLike\) or a non-empty list of paths", "dict"),
    ("ARCHIVE, MISSING", "set-a.tar.gz or a folder of record files", "'.*missing-set-b.tar.gz'"),
])
def test_bad_sources_are_named_before_anything_is_parsed(archives, tmp_path, monkeypatch, source, expected, got):
    if isinstance(source, str):
        source = [{"ARCHIVE": archives["a"], "MISSING": tmp_path / "missing-set-b.tar.gz", "3": 3, "None": None}[s]
                  for s in source.split(", ")]
    monkeypatch.setattr(physionet2012, "_parse_source", lambda _: pytest.fail("parsed before the check"))
    for call in (lambda: load_physionet2012(source, "tpatchgnn"), lambda: physionet_rows(source)):
        with pytest.raises(InputError, match=f"^load_physionet2012: source: expected {expected}, got {got}$") as err:
            call()
        assert err.value.function == "load_physionet2012" and err.value.argument == "source"
        if "position" in got or got in ("bytes", "dict"):
            assert isinstance(err.value, TypeError)


def test_default_path_finds_all_three_sets_and_keeps_the_one_archive_answer(archives, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ICML26_PHYSIONET", str(archives["a"]))
    assert default_physionet_path() == archives["a"]
    assert default_physionet_path(all_sets=True) == [archives[x] for x in "abc"]
    monkeypatch.setenv("ICML26_PHYSIONET", str(archives["a"].parent))  # the folder holding the sets
    assert default_physionet_path(all_sets=True) == [archives[x] for x in "abc"]
    lone = tmp_path / "lone"
    lone.mkdir()
    (lone / "set-a.tar.gz").write_bytes(archives["a"].read_bytes())
    monkeypatch.setenv("ICML26_PHYSIONET", str(lone / "set-a.tar.gz"))
    assert default_physionet_path() == lone / "set-a.tar.gz"
    found = default_physionet_path(all_sets=True)  # B and C absent beside it: the CI folder, or nothing
    assert found is None or [p.name for p in found] == ["set-a.tar.gz", "set-b.tar.gz", "set-c.tar.gz"]
    assert physionet2012.main(["--data", str(archives["c"]), str(archives["a"]), str(archives["b"])]) == 0
    out = capsys.readouterr().out
    assert "sources set-a.tar.gz, set-b.tar.gz, set-c.tar.gz" in out and "LOCF       test: MSE" in out


# ---------------------------------------------------------------------------------------------
# The real sets A, B and C (skipped where the shared files are absent)
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def all_sets():
    paths = default_physionet_path(all_sets=True)
    if paths is None:
        pytest.skip("PhysioNet 2012 set-a/b/c.tar.gz not found together: set ICML26_PHYSIONET to set-a.tar.gz with "
                    "set-b.tar.gz and set-c.tar.gz beside it (in CI they are at ../shared/data/physionet2012/ "
                    "beside the repository)")
    return load_physionet2012(paths[::-1], protocol="tpatchgnn")  # given C, B, A: taken A, B, C


def test_tpatchgnn_on_the_12000_stays_equals_an_independent_replica(all_sets):
    """The figures of an independent replica of t-PatchGNN's code (usail-hkust/t-PatchGNN at commit
    00c94e7bbaf21c71b03ed84ff690ae59e37129e5): ``PhysioNet.download``'s parsing loop per set, in each archive's
    member order (our reconstruction of its ``os.listdir``), ``data_a + data_b + data_c``; ``lib/parse_datasets.py``'s
    two ``train_test_split`` calls (sklearn 1.9.1); ``get_data_min_max(seen_data)``, ``normalize_masked_data`` and
    ``variable_time_collate_fn`` (history 24, batch 32) in float32 torch; LOCF and history-mean forecasts (empty
    channels filled with the mean of the normalised training observations) scored by ``lib/evaluation.py``'s
    ``compute_error(..., reduce="sum")`` and ``evaluation``'s per-variable average. The same replica on set A alone
    gives the existing set-A figures (LOCF 6.671369e-3, history mean 8.094964e-3). Tolerance: the replica is
    float32, this pipeline float64 (they differ by < 3e-7 relative)."""
    info = all_sets.info
    assert info["records"] == 12000 and info["sources"] == ["set-a.tar.gz", "set-b.tar.gz", "set-c.tar.gz"]
    assert [len(info["split_record_ids"][k]) for k in ("train", "validation", "test")] == [7200, 2400, 2400]
    assert info["split_record_ids"]["test"][:5] == ["141532", "148956", "140795", "155610", "139668"]
    assert info["time_max"] == 48.0
    fill = info["train_mean"]
    replica = {"validation": {"locf": (6.597115e-3, 3.761892e-2), "mean": (8.103694e-3, 4.330674e-2)},
               "test": {"locf": (6.371091e-3, 3.781834e-2), "mean": (7.514124e-3, 4.290018e-2)}}
    for part, figures in replica.items():
        for name, model in (("locf", LOCFForecaster(fill_value=fill)), ("mean", HistoryMeanForecaster(fill))):
            res = evaluate_forecaster(model, getattr(all_sets, part))
            assert res["variables"] == 37
            assert res["mse"] == pytest.approx(figures[name][0], rel=1e-5), (part, name)
            assert res["mae"] == pytest.approx(figures[name][1], rel=1e-5), (part, name)
