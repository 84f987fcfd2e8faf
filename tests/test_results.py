import dataclasses
import json
import math

import numpy as np
import pytest

from icml26 import Claim, InputError, Result


@pytest.mark.parametrize(
    "make, measured, reference, expected",
    [
        (Claim.less, 1.0, 2.0, True),
        (Claim.less, 2.0, 2.0, False),
        (Claim.at_most, 2.0, 2.0, True),
        (Claim.greater, 3.0, 2.0, True),
        (Claim.greater, 2.0, 2.0, False),
        (Claim.at_least, 2.0, 2.0, True),
        (Claim.at_least, 1.9, 2.0, False),
    ],
)
def test_comparisons(make, measured, reference, expected):
    claim = make("statement", measured, reference)
    assert claim.holds is expected
    assert claim.measured == measured and claim.reference == reference


def test_factor_scales_the_reference():
    assert Claim.less("MSE vs LOCF", 0.6, 1.0, factor=0.7).holds
    assert not Claim.less("MSE vs LOCF", 0.75, 1.0, factor=0.7).holds
    assert "0.7 x reference" in Claim.less("s", 0.6, 1.0, factor=0.7).comparison


def test_close_uses_both_tolerances():
    assert Claim.close("s", 1.04, 1.0, rtol=0.05).holds
    assert not Claim.close("s", 1.06, 1.0, rtol=0.05).holds
    assert Claim.close("s", 0.009, 0.0, rtol=0.0, atol=0.01).holds


def test_nan_never_holds_and_serialises_as_null():
    claim = Claim.greater("s", float("nan"), 0.0)
    assert not claim.holds
    data = json.loads(json.dumps(claim.to_dict(), allow_nan=False))
    assert data["measured"] is None and data["holds"] is False
    assert not Claim.less("s", 1.0, float("nan")).holds


def test_verdict_cannot_be_set_by_hand():
    claim = Claim.less("s", 3.0, 2.0)
    with pytest.raises((AttributeError, dataclasses.FrozenInstanceError)):
        claim.holds = True
    with pytest.raises(dataclasses.FrozenInstanceError):
        claim.measured = 1.0
    forged = claim.to_dict() | {"holds": True}
    assert Claim.from_dict(forged).holds is False  # verdict recomputed, never read back


def test_accepts_numpy_and_torch_scalars():
    torch = pytest.importorskip("torch")
    assert Claim.less("s", np.float32(1.0), np.array(2.0)).holds
    assert Claim.less("s", torch.tensor(1.0), 2).holds
    assert isinstance(Claim.less("s", torch.tensor(1.0), 2).measured, float)


@pytest.mark.parametrize("bad", ["1.0", None, [1.0, 2.0], True, np.ones(3)])
def test_rejects_non_numbers(bad):
    with pytest.raises(TypeError, match="measured"):
        Claim.less("s", bad, 1.0)


def test_rejects_bad_statement_relation_and_tolerance():
    with pytest.raises(ValueError, match="statement"):
        Claim.less("  ", 1.0, 2.0)
    with pytest.raises(ValueError, match="relation"):
        Claim("s", 1.0, 2.0, "roughly")
    with pytest.raises(InputError, match="Claim: rtol: expected a non-negative finite number, got -1.0"):
        Claim.close("s", 1.0, 2.0, rtol=-1)


@pytest.mark.parametrize("factor", [math.nan, -1.0, 0.0, math.inf])
def test_rejects_a_factor_that_would_turn_or_trivialise_the_test(factor):
    with pytest.raises(InputError, match="Claim: factor: expected a positive finite number"):
        Claim.less("s", 1.0, 2.0, factor=factor)


@pytest.mark.parametrize("rtol, atol", [(math.nan, 0.0), (0.1, math.nan), (math.inf, 0.0), (0.0, -0.5)])
def test_rejects_nan_infinite_or_negative_tolerances(rtol, atol):
    with pytest.raises(InputError, match="Claim: (rtol|atol)"):
        Claim.close("s", 1.0, 2.0, rtol=rtol, atol=atol)


@pytest.mark.parametrize("measured", [math.inf, -math.inf, math.nan, 3.0])
@pytest.mark.parametrize("relation", ["less", "greater", "at_most", "at_least"])
def test_verdict_survives_a_json_round_trip(measured, relation):
    claim = getattr(Claim, relation)("s", measured, 5.0)
    data = json.loads(json.dumps(claim.to_dict(), allow_nan=False))
    back = Claim.from_dict(data)
    assert back.holds == claim.holds
    assert (math.isnan(back.measured) and math.isnan(measured)) or back.measured == measured


def test_result_is_json_serialisable():
    torch = pytest.importorskip("torch")
    result = Result(
        metrics={"loss": np.float64(0.5), "curve": np.arange(3), "t": torch.ones(2), "inf": math.inf},
        tables={"rows": [{"a": 1, "b": np.int64(2)}]},
        claims=[Claim.less("loss below 1", 0.5, 1.0)],
    )
    data = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert data["metrics"] == {"loss": 0.5, "curve": [0, 1, 2], "t": [1.0, 1.0], "inf": None}
    assert data["tables"]["rows"] == [{"a": 1, "b": 2}]
    assert data["claims"][0]["holds"] is True


def test_result_refuses_what_json_cannot_hold():
    with pytest.raises(TypeError, match="results.json"):
        Result(metrics={"obj": object()}).to_dict()
    with pytest.raises(TypeError, match="Claim"):
        Result().add_claim(("s", True))


def test_median_over_seeds_keeps_the_threshold_and_every_seeds_verdict():
    from icml26.results import median_over_seeds

    per_seed = {0: [Claim.less("a", 1.0, 2.0), Claim.at_least("b", 0.7, 0.9)],
                1: [Claim.less("a", 3.0, 2.0), Claim.at_least("b", 0.95, 0.9)],
                2: [Claim.less("a", 1.5, 2.0), Claim.at_least("b", 1.0, 0.9)]}
    claims, rows = median_over_seeds(per_seed)
    assert [(c.measured, c.reference, c.relation, c.holds) for c in claims] == [
        (1.5, 2.0, "less", True), (0.95, 0.9, "at_least", True)]
    assert claims[0].statement == "a (median over seeds 0, 1, 2)"
    assert [(r["claim"], r["seed"], r["holds"]) for r in rows] == [
        ("a", 0, True), ("a", 1, False), ("a", 2, True), ("b", 0, False), ("b", 1, True), ("b", 2, True)]
    with pytest.raises(InputError, match="median_over_seeds: per_seed: expected the same claims at every seed"):
        median_over_seeds({0: [Claim.less("a", 1, 2)], 1: [Claim.less("a", 1, 2, factor=0.5)]})
    with pytest.raises(InputError, match="median_over_seeds: per_seed"):
        median_over_seeds({})
    for order in ([0.9, math.nan, 0.95], [math.nan, 0.9, 0.95]):  # one seed measured nothing: never holds
        (claim,), _ = median_over_seeds({s: [Claim.at_least("c", v, 0.8)] for s, v in enumerate(order)})
        assert math.isnan(claim.measured) and not claim.holds


def test_over_seeds_one_seed_as_is_several_on_the_median():
    from icml26.results import over_seeds

    one = over_seeds([3], lambda s: Result(metrics={"s": s}, claims=[Claim.less("a", s, 5.0)]))
    assert one.claims[0].statement == "a" and "claims per seed" not in one.tables
    many = over_seeds([0, 1, 2], lambda s: Result(metrics={"s": s}, claims=[Claim.less("a", [9, 1, 2][s], 5.0)]))
    assert many.metrics == {"s": 0} and many.claims[0].measured == 2 and many.claims[0].holds
    assert "median over seeds [0, 1, 2]" in many.notes
    with pytest.raises(InputError, match="over_seeds: seeds: expected at least one seed"):
        over_seeds([], lambda s: Result())


def test_markdown_table_escapes_pipes_in_headers_and_cells():
    from icml26.report import markdown_table

    table = markdown_table([{"mean |Q - Q*|": "a|b"}])
    assert table.splitlines()[0] == "| mean \\|Q - Q*\\| |" and table.splitlines()[2] == "| a\\|b |"
