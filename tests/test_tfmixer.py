"""TFMixer (``models/tfmixer/modeling.py``), the IMTS data and baselines (``eval/tasks/tfmixer/imts.py``) and the experiment.

Masking is checked the strict way: padded slots and unobserved slots holding NaN must leave every
forecast at a real query and every loss unchanged. The PhysioNet 2012 loader reads record files
written here in the challenge's format. One reduced run of the experiment checks the claims'
direction end to end.
"""

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from icml26.errors import InputError  # noqa: E402
from icml26.eval.tasks.tfmixer import SyntheticIMTSConfig, co2_weekly, compute_forecast_metrics, evaluate_forecaster, generate_synthetic_imts, load_co2_imts, load_physionet2012, make_synthetic_imts, read_physionet_record
from icml26.models.tfmixer import IMTSCollator, LOCFForecaster, HistoryMeanForecaster, MTANForecaster
from icml26.models.tfmixer import TFMixerConfig, TFMixerForForecasting  # noqa: E402

SMALL = dict(num_channels=3, d_model=16, num_frequencies=8, num_patches=8, num_query_patches=4, time_embedding_dim=8)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _model(seed=0, **overrides):
    torch.manual_seed(seed)
    return TFMixerForForecasting(TFMixerConfig(**{**SMALL, **overrides})).eval()


def _batch(b=3, length=20, c=3, h=5, seed=0, density=0.4):
    gen = torch.Generator().manual_seed(seed)
    times = torch.sort(torch.rand(b, length, generator=gen), -1).values
    mask = torch.rand(b, length, c, generator=gen) < density
    mask[:, 0, 0] = True  # every row has some history
    values = torch.where(mask, torch.randn(b, length, c, generator=gen), 0.0)
    query_times = 1 + 0.5 * torch.rand(b, h, generator=gen)
    targets = torch.randn(b, h, c, generator=gen)
    target_mask = torch.rand(b, h, c, generator=gen) < 0.6
    return dict(values=values, times=times, mask=mask, query_times=query_times, targets=targets,
                target_mask=target_mask)


def _pad(batch, extra_len=7, extra_h=3, fill=float("nan")):
    """Append unobserved history slots and unobserved queries holding ``fill``."""
    b, _, c = batch["values"].shape
    cat = lambda x, shape, v, dtype=None: torch.cat([x, torch.full(shape, v, dtype=dtype or x.dtype)], 1)  # noqa: E731
    return dict(values=cat(batch["values"], (b, extra_len, c), fill), times=cat(batch["times"], (b, extra_len), fill),
                mask=cat(batch["mask"], (b, extra_len, c), False),
                query_times=cat(batch["query_times"], (b, extra_h), fill),
                targets=cat(batch["targets"], (b, extra_h, c), fill),
                target_mask=cat(batch["target_mask"], (b, extra_h, c), False))


# ---------------------------------------------------------------------------------------------
# Masking, NaN, shapes
# ---------------------------------------------------------------------------------------------
MODELS = {
    "tfmixer": lambda: _model(),
    "no_gfm": lambda: _model(use_gfm=False),
    "no_ltm": lambda: _model(use_ltm=False, frequency_layout="per_channel"),
    "gate_raw": lambda: _model(fusion="gate", seasonal_coefficients="raw", learnable_seasonal_scale=True,
                               frequency_init="log", instance_norm=False),
    "mtan": lambda: (torch.manual_seed(0), MTANForecaster(3, hidden_size=8, num_reference=6, time_dim=6))[1].eval(),
    "locf": lambda: LOCFForecaster(),
    "mean": lambda: HistoryMeanForecaster(),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_padded_slots_change_nothing(name):
    model, batch = MODELS[name](), _batch()
    out = model(**batch)
    padded = model(**_pad(batch))
    h = batch["query_times"].shape[1]
    torch.testing.assert_close(padded.forecasts[:, :h], out.forecasts, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(padded.loss, out.loss, atol=1e-6, rtol=1e-5)
    if getattr(out, "reconstruction_loss", None) is not None:
        torch.testing.assert_close(padded.reconstruction_loss, out.reconstruction_loss, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("name", ["tfmixer", "no_ltm", "gate_raw", "mtan"])
def test_nan_in_unobserved_slots_leaks_nowhere(name):
    model, batch = MODELS[name](), _batch(seed=1)
    model.train()
    dirty = dict(batch)
    dirty["values"] = torch.where(batch["mask"], batch["values"], torch.nan)  # NaN beside observed channels
    dirty["targets"] = torch.where(batch["target_mask"], batch["targets"], torch.inf)
    dirty = _pad(dirty)
    clean_out = model(**batch)
    clean_out.loss.backward()
    clean_grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
    model.zero_grad()
    out = model(**dirty)
    out.loss.backward()
    torch.testing.assert_close(out.loss, clean_out.loss, atol=1e-6, rtol=1e-5)
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert len(grads) == len(clean_grads)
    for g, ref in zip(grads, clean_grads):
        assert torch.isfinite(g).all()
        torch.testing.assert_close(g, ref, atol=1e-5, rtol=1e-4)


def test_one_observation_and_empty_channels():
    model = _model()
    one = dict(values=torch.tensor([[[0.5, 0.0, 0.0]]]), times=torch.tensor([[0.3]]),
               mask=torch.tensor([[[True, False, False]]]), query_times=torch.tensor([[1.1, 1.4]]))
    out = model(**one, output_components=True)
    assert out.forecasts.shape == (1, 2, 3) and torch.isfinite(out.forecasts).all()
    assert out.seasonal.shape == (1, 2, 3) and out.reconstruction.shape == (1, 1, 3)
    batch = _batch(b=4, c=3)
    batch["mask"][:, :, 2] = False  # channel 2 never observed in any row
    batch["mask"][1, :, 1] = False
    out = model(**batch)
    assert out.forecasts.shape == (4, 5, 3) and torch.isfinite(out.forecasts).all() and torch.isfinite(out.loss)
    out = model(**{**batch, "query_times": torch.zeros(4, 0), "targets": None, "target_mask": None})
    assert out.forecasts.shape == (4, 0, 3) and out.loss is None


def test_forecast_loss_is_the_masked_mse_and_ablation_flags():
    batch = _batch(seed=2)
    model = _model(reconstruction_weight=0.5)
    out = model(**batch)
    m = batch["target_mask"]
    expected = ((out.forecasts - batch["targets"])[m] ** 2).mean()
    torch.testing.assert_close(out.forecast_loss, expected)
    torch.testing.assert_close(out.loss, out.forecast_loss + 0.5 * out.reconstruction_loss)
    as_tuple = model(**batch, return_dict=False)
    assert isinstance(as_tuple, tuple) and torch.equal(as_tuple[1], out.forecasts)
    no_rec = _model(reconstruction_weight=0.0)(**batch)
    torch.testing.assert_close(no_rec.loss, no_rec.forecast_loss)
    no_gfm = _model(use_gfm=False)
    assert no_gfm.frequencies is None and no_gfm(**batch).reconstruction_loss is None
    assert _model(use_ltm=False).ltm is None
    with pytest.raises(InputError, match="TFMixerConfig: use_gfm/use_ltm: expected at least one branch True"):
        TFMixerConfig(use_gfm=False, use_ltm=False)
    with pytest.raises(InputError, match="TFMixerConfig: fusion: expected one of"):
        TFMixerConfig(fusion="sum")


@pytest.mark.parametrize("field, value, expected", [
    ("reconstruction_weight", float("nan"), "a non-negative finite number"),
    ("reconstruction_weight", float("inf"), "a non-negative finite number"),
    ("reconstruction_weight", -0.5, "a non-negative finite number"),
    ("mlp_ratio", 0.0, "a positive finite number"),
    ("mlp_ratio", -1.0, "a positive finite number"),
    ("mlp_ratio", float("nan"), "a positive finite number"),
    ("dropout", 1.0, r"a number in \[0, 1\)"),
    ("max_cycles", float("inf"), "a positive finite number"),
    ("reconstruction_scale", float("nan"), "a finite number"),
])
def test_config_refuses_values_it_would_silently_drop_or_clamp(field, value, expected):
    """NaN passes every comparison (a NaN reconstruction weight used to drop the loss), and a ratio <= 0
    used to be clamped to a hidden width of 2: both are refused now."""
    with pytest.raises(InputError, match=rf"TFMixerConfig: {field}: expected {expected}, got"):
        TFMixerConfig(**{field: value})
    assert TFMixerConfig(reconstruction_weight=0, mlp_ratio=0.5).reconstruction_weight == 0.0


def test_decoder_zero_init_starts_at_the_level_and_reconstruction_scale_is_its_own():
    """decoder_zero_init: the untrained model forecasts its level plus its seasonal part, nothing more;
    reconstruction_scale: the history is rebuilt at that fixed scale while the forecast keeps seasonal_coef,
    densely and sparsely alike (the same losses)."""
    batch = _batch(seed=5)
    plain = _model(forecast_level="last", seasonal_coef=0.0, decoder_zero_init=True)
    out = plain(**{k: v for k, v in batch.items() if k not in ("targets", "target_mask")}, output_components=True)
    level = _model(forecast_level="last", seasonal_coef=0.0, use_gfm=False, decoder_zero_init=True)
    same = level(**{k: v for k, v in batch.items() if k not in ("targets", "target_mask")})
    torch.testing.assert_close(out.forecasts, same.forecasts)  # the level (LOCF) alone: the decoder adds 0
    other = _model(forecast_level="last", seasonal_coef=0.0, initializer_range=0.2)(**batch).forecasts
    assert (other - out.forecasts).abs().max() > 1e-3  # the negative control: a decoder drawn at random adds to it
    with pytest.raises(InputError, match="decoder_zero_init: expected True or False"):
        TFMixerConfig(decoder_zero_init=1)
    shared, own = _model(seed=1), _model(seed=1, reconstruction_scale=1.0)
    a, b = shared(**batch, output_components=True), own(**batch, output_components=True)
    torch.testing.assert_close(a.forecasts, b.forecasts)  # the forecast's synthesis is untouched
    torch.testing.assert_close(b.reconstruction, a.reconstruction / 2)  # c_k 1 against the default 2
    sparse = _model(seed=1, reconstruction_scale=1.0, sparse_decoding=True)(**batch)
    torch.testing.assert_close(sparse.reconstruction_loss, b.reconstruction_loss)
    torch.testing.assert_close(sparse.loss, b.loss)
    assert _model(reconstruction_scale=None).reconstruction_synthesis is None


def test_frequencies_receive_gradients_from_both_losses():
    model = _model().train()
    out = model(**_batch(seed=3))
    (raw,) = [p for n, p in model.named_parameters() if n.endswith("nudft.raw")]
    grad_rec = torch.autograd.grad(out.reconstruction_loss, raw, retain_graph=True)[0]
    grad_fc = torch.autograd.grad(out.forecast_loss, raw)[0]
    assert grad_rec.abs().sum() > 0 and grad_fc.abs().sum() > 0


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------
def test_clear_errors_for_bad_inputs():
    model, batch = _model(), _batch()
    bad = {
        "times": (dict(batch, times=batch["times"][:, :-1]), r"times: expected \[batch, length\]"),
        "mask": (dict(batch, mask=batch["mask"][..., :2]), r"mask: expected \(3, 20, 3\)"),
        "values": (dict(batch, values=batch["values"][0]), r"values: expected \[batch, length, channels\]"),
        "channels": (dict(batch, values=batch["values"][..., :2], mask=batch["mask"][..., :2]),
                     r"values: expected 3 channels \(config.num_channels\)"),
        "query": (dict(batch, query_times=batch["query_times"][:2]), "query_times: expected"),
        "targets": (dict(batch, targets=batch["targets"][:, :2]), "targets: expected"),
    }
    for name, (inputs, pattern) in bad.items():
        with pytest.raises(InputError, match="TFMixerForForecasting: " + pattern):
            model(**inputs)
    no_history = dict(batch, mask=batch["mask"].clone())
    no_history["mask"][1] = False
    with pytest.raises(InputError, match=r"TFMixerForForecasting: mask: expected at least one observed point.*"
                                         r"got none in rows \[1\]"):
        model(**no_history)
    with pytest.raises(InputError, match="at least one observed"):
        LOCFForecaster()(**no_history)
    nan_observed = dict(batch, values=torch.where(batch["mask"], torch.nan, batch["values"]))
    with pytest.raises(InputError, match="values: expected finite numbers at observed slots.*got NaN/Inf"):
        model(**nan_observed)


def test_value_checks_follow_the_validation_cost_rule(monkeypatch):
    """Checks that read values run on CPU tensors or with ICML26_CHECK_VALUES=1, never silently on CUDA."""
    import icml26.kernels
    import icml26.models.tfmixer.modeling as tfmixer
    import icml26.training.r2g.loss as r2g

    # One helper holds the rule (tested in tests/test_kernels_backend.py); the models use it.
    assert tfmixer.values_checked is icml26.kernels.values_checked is r2g.values_checked


# ---------------------------------------------------------------------------------------------
# Backends, save/load
# ---------------------------------------------------------------------------------------------
def test_triton_backend_matches_and_stores_no_phase_tensor(monkeypatch):
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    length, k = 37, 13  # distinctive sizes: no saved tensor may carry both
    batch = _batch(b=2, length=length, c=3, h=4, seed=4)
    outs, grads = {}, {}
    for backend in ("torch", "triton"):
        model = _model(num_frequencies=k, nudft_backend=backend, max_cycles=2.0 * k).train()
        shapes = []

        def pack(t):
            shapes.append(tuple(t.shape))
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = model(**batch)
        out.loss.backward()
        outs[backend] = out.loss.detach()
        grads[backend] = model.gfm.nudft.raw.grad.clone()
        if backend == "triton":
            bad = [s for s in shapes if length in s and k in s]
            assert not bad, f"an (N x K) tensor was saved for the backward: {bad}"
    torch.testing.assert_close(outs["triton"], outs["torch"], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(grads["triton"], grads["torch"], atol=1e-4, rtol=1e-3)


def test_save_load_round_trip(tmp_path):
    from transformers import AutoConfig, AutoModel

    model = _model(frequency_layout="per_channel", learnable_seasonal_scale=True)
    with torch.no_grad():
        model.gfm.nudft.raw.add_(0.1)  # trained-looking frequencies must survive the round trip
    model.save_pretrained(tmp_path)
    loaded = TFMixerForForecasting.from_pretrained(tmp_path).eval()
    assert AutoConfig.from_pretrained(tmp_path).model_type == "tfmixer"
    assert type(AutoModel.from_pretrained(tmp_path)) is TFMixerForForecasting
    assert loaded.config.frequency_layout == "per_channel"
    batch = _batch(seed=5)
    torch.testing.assert_close(loaded(**batch).forecasts, model(**batch).forecasts)
    torch.testing.assert_close(loaded.frequencies, model.frequencies)


# ---------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------
def test_synthetic_generator_is_seeded_and_irregular():
    cfg = SyntheticIMTSConfig(num_channels=4)
    a, b = generate_synthetic_imts(20, cfg, seed=3), generate_synthetic_imts(20, cfg, seed=3)
    c = generate_synthetic_imts(20, cfg, seed=4)
    for sa, sb in zip(a, b):
        for key in sa:
            assert torch.equal(sa[key], sb[key])
    assert not torch.equal(a[0]["times"], c[0]["times"]) if a[0]["times"].shape == c[0]["times"].shape else True
    s = a[0]
    assert (s["mask"].sum(-1) == 1).all()  # channels are asynchronous: one channel per timestamp
    assert (s["times"].diff() >= 0).all() and s["times"].min() >= 0 and s["times"].max() <= 1
    assert (s["query_times"] > 1).all() and (s["query_times"] <= 1.5).all()
    assert s["target_mask"].any(-1).all()
    lengths = {len(x["times"]) for x in a}
    assert len(lengths) > 1 and a.info["frequencies"] == cfg.frequencies


def test_collator_pads_with_unobserved_slots():
    data = generate_synthetic_imts(5, seed=1)
    batch = IMTSCollator(pad_to_multiple_of=8)([data[i] for i in range(5)])
    length = max(len(data[i]["times"]) for i in range(5))
    assert batch["values"].shape[1] % 8 == 0 and batch["values"].shape[1] >= length
    for i in range(5):
        n = len(data[i]["times"])
        assert torch.equal(batch["mask"][i, :n], data[i]["mask"]) and not batch["mask"][i, n:].any()
        assert torch.equal(batch["values"][i, :n], data[i]["values"])
        h = len(data[i]["query_times"])
        assert not batch["target_mask"][i, h:].any()
    with pytest.raises(InputError, match=r"IMTSCollator: sample 0: expected keys .*missing"):
        IMTSCollator()([{"values": torch.zeros(2, 3)}])
    with pytest.raises(InputError, match="IMTSCollator: sample 1: expected 6 channels like sample 0, got values"):
        IMTSCollator()([data[0], generate_synthetic_imts(1, SyntheticIMTSConfig(num_channels=2))[0]])


def test_co2_from_statsmodels():
    pytest.importorskip("statsmodels")
    series = co2_weekly()
    assert len(series) == 2284 and int(sum(map(math.isnan, series))) == 59  # the record's genuine gaps
    splits = load_co2_imts(stride=8, keep=0.5, seed=0)
    s = splits.train[0]
    assert s["values"].shape == (156, 1) and s["query_times"].shape == (52,)
    observed = s["values"][s["mask"][:, 0], 0]
    assert abs(float(observed.mean())) < 1e-4 and abs(float(observed.std(unbiased=False)) - 1) < 1e-3
    frac = sum(float(x["mask"].float().mean()) for x in splits.train) / len(splits.train)
    assert 0.4 < frac < 0.55  # 50% kept, minus the genuine gaps
    assert len(splits.validation) > 0 and len(splits.test) > 0


def test_physionet_record_parsing(physionet_folder):
    rec = read_physionet_record(physionet_folder / "set-a" / "132530.txt")
    assert rec["record_id"] == "132530" and rec["static"]["Age"] == 50 and rec["static"]["Height"] == 170
    names = [name for _, name, _ in rec["observations"]]
    assert "RecordID" not in names and names.count("Urine") == 2
    unknown = read_physionet_record(physionet_folder / "set-a" / "132541.txt")
    assert "Height" not in [n for _, n, _ in unknown["observations"]]  # -1 = unknown, not an observation
    bad = physionet_folder / "bad.txt"
    bad.write_text("Time,Parameter,Value\n7h,HR,70\n")
    with pytest.raises(InputError, match=r"read_physionet_record: .*:2: expected 'HH:MM,Parameter,Value', got '7h,HR,70'"):
        read_physionet_record(bad)


def test_physionet_loader_zscore_24h_protocol(physionet_folder):
    splits = load_physionet2012(physionet_folder, protocol="zscore_24h", split=(0.5, 0.25, 0.25), seed=0)
    info = splits.info
    assert info["records"] == 6 and info["dropped"] == {"no_history": 1, "no_forecast": 1}
    variables = list(info["variables"])
    kept = [s for part in (splits.train, splits.validation, splits.test) for s in part]
    ids = [i for part in (splits.train, splits.validation, splits.test) for i in part.info["record_ids"]]
    assert sorted(ids) == ["132530", "132531", "132532", "132533"]
    s = kept[0]
    assert s["values"].shape[1] == 41 and s["times"].max() < 1 and s["times"][0] == 0
    # forecast window (24 h, 48 h]: 24:30, 30:00, 37:00, 38:15, 39:00, 40:00 -> times / 24
    expected = torch.tensor([24.5, 30.0, 37.0, 38.25, 39.0, 40.0]) / 24
    torch.testing.assert_close(s["query_times"], expected)
    # the duplicated Urine at 01:00 is one observation (their average), the static descriptors are at t = 0
    urine = variables.index("Urine")
    assert int(s["mask"][:, urine].sum()) == 1
    assert s["mask"][0, variables.index("Age")]
    # normalisation statistics come from the training records only
    train_ids = splits.train.info["record_ids"]
    hr = variables.index("HR")
    train_hr = []
    for rid in info["split_record_ids"]["train"]:
        rec = read_physionet_record(physionet_folder / "set-a" / f"{rid}.txt")
        train_hr += [v for _, n, v in rec["observations"] if n == "HR"]
    assert set(train_ids) <= set(info["split_record_ids"]["train"])
    assert info["center"][hr] == pytest.approx(sum(train_hr) / len(train_hr))
    if "132540" not in info["split_record_ids"]["train"]:
        assert max(train_hr) < 1000  # the outlier of a held-out record did not leak into the statistics


def test_physionet_loader_zscore_36h_3obs_protocol_and_errors(physionet_folder, tmp_path):
    splits = load_physionet2012(physionet_folder, protocol="zscore_36h_3obs", normalization="minmax", include_static=False,
                                variables=("HR", "Temp", "Urine", "NIMAP"), split=(0.5, 0.25, 0.25))
    for part in (splits.train, splits.validation, splits.test):
        for s in part:
            assert s["values"].shape[1] == 4 and len(s["query_times"]) == 3  # the next 3 observation times
            torch.testing.assert_close(s["query_times"], torch.tensor([37.0, 38.25, 39.0]) / 36)
            assert s["times"].max() < 1
    train = torch.cat([s["values"][s["mask"]] for s in splits.train])
    assert train.min() >= 0 and train.max() <= 1
    with pytest.raises(InputError, match="load_physionet2012: protocol: expected one of"):
        load_physionet2012(physionet_folder, protocol="grafiti")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"load_physionet2012: source: expected record files .*got none under"):
        load_physionet2012(tmp_path / "empty", cache=False)
    with pytest.raises(InputError, match="load_physionet2012: source: expected set-a.tar.gz or a folder"):
        load_physionet2012(tmp_path / "missing")


# ---------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------
def test_hf_trainer_trains_it_and_validation_mse_falls(tmp_path):
    from transformers import EarlyStoppingCallback, Trainer, TrainingArguments

    cfg = SyntheticIMTSConfig(num_channels=3, frequencies=(2.3, 5.7))
    splits = make_synthetic_imts((256, 64, 8), cfg, seed=0)
    model = _model(seed=0).train()
    args = TrainingArguments(
        output_dir=str(tmp_path), per_device_train_batch_size=32, per_device_eval_batch_size=64, learning_rate=3e-3,
        max_steps=60, eval_strategy="steps", eval_steps=20, save_strategy="steps", save_steps=20,
        load_best_model_at_end=True, metric_for_best_model="mse", greater_is_better=False,
        label_names=["targets", "target_mask"], eval_do_concat_batches=False, report_to="none", use_cpu=True,
        logging_steps=20, dataloader_num_workers=0, save_total_limit=1, seed=0, disable_tqdm=True)
    trainer = Trainer(model=model, args=args, train_dataset=splits.train, eval_dataset=splits.validation,
                      data_collator=IMTSCollator(), compute_metrics=compute_forecast_metrics,
                      callbacks=[EarlyStoppingCallback(early_stopping_patience=3)])
    before = trainer.evaluate()["eval_mse"]
    assert before == pytest.approx(evaluate_forecaster(model, splits.validation)["mse"], rel=1e-5)
    trainer.train()
    after = trainer.evaluate()["eval_mse"]
    assert after < 0.8 * before, (before, after)


def test_trainer_defaults_report_eval_loss_and_the_callback_names_label_names(tmp_path, caplog):
    from transformers import Trainer, TrainingArguments

    from icml26.models.tfmixer import LABEL_NAMES, TFMixerLabelsCallback

    splits = make_synthetic_imts((8, 32, 8), SyntheticIMTSConfig(num_channels=3, frequencies=(2.3,)), seed=0)
    model = _model(seed=0)

    def trainer(**kwargs):
        args = TrainingArguments(output_dir=str(tmp_path), per_device_eval_batch_size=16, report_to="none",
                                 use_cpu=True, disable_tqdm=True, **kwargs)
        return Trainer(model=model, args=args, eval_dataset=splits.validation, data_collator=IMTSCollator(),
                       callbacks=[TFMixerLabelsCallback()])

    expected = evaluate_forecaster(model, splits.validation)["mse"]
    with caplog.at_level("WARNING"):
        plain = trainer().evaluate()  # every argument at its default
    assert plain["eval_loss"] > 0 and "label_names=['targets', 'target_mask']" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"):
        labelled = trainer(label_names=LABEL_NAMES, eval_do_concat_batches=False)
        labelled.compute_metrics = compute_forecast_metrics
        metrics = labelled.evaluate()
    assert "Trainer sees no labels" not in caplog.text
    assert metrics["eval_loss"] == pytest.approx(plain["eval_loss"], rel=1e-5)
    assert metrics["eval_mse"] == pytest.approx(expected, rel=1e-5)
    without = trainer()
    without.compute_metrics = compute_forecast_metrics
    with pytest.raises(InputError, match=r"compute_forecast_metrics: eval_pred.label_ids: .*label_names"):
        without.evaluate()


def test_compute_forecast_metrics_with_and_without_concatenation():
    from transformers import EvalPrediction

    gen = torch.Generator().manual_seed(0)
    shapes = [(2, 3, 2), (3, 5, 2)]
    preds = [torch.randn(*s, generator=gen) for s in shapes]
    targets = [torch.randn(*s, generator=gen) for s in shapes]
    masks = [torch.rand(*s, generator=gen) < 0.7 for s in shapes]
    se = sum(float(((p - t)[m] ** 2).sum()) for p, t, m in zip(preds, targets, masks))
    expected = se / sum(int(m.sum()) for m in masks)
    batches = compute_forecast_metrics(EvalPrediction(
        predictions=[(p.numpy(), 0.0) for p in preds],
        label_ids=[(t.numpy(), m.numpy()) for t, m in zip(targets, masks)]))
    assert batches["mse"] == pytest.approx(expected)
    pad = lambda x, v: torch.cat([x, torch.full((x.shape[0], 2, 2), v, dtype=x.dtype)], 1)  # noqa: E731
    concat = EvalPrediction(  # what Trainer's concatenation makes: horizons padded with -100 (True in a bool mask)
        predictions=(torch.cat([pad(preds[0], -100), preds[1]]).numpy(),),
        label_ids=(torch.cat([pad(targets[0], -100), targets[1]]).numpy(),
                   torch.cat([pad(masks[0], True), masks[1]]).numpy()))
    assert compute_forecast_metrics(concat)["mse"] == pytest.approx(expected)


def test_experiment_end_to_end_reduced(tmp_path, monkeypatch):
    """The real experiment, shrunk: TFMixer beats the no-GFM ablation and LOCF, and its frequencies move."""
    from icml26.eval.experiments import tfmixer as exp
    from icml26.runner import RunConfig

    import dataclasses

    small = dataclasses.replace(exp.SETTINGS["quick"], synthetic_sizes=(200, 80, 100), steps=60, co2_steps=60,
                                eval_every=30, batch_size=16, co2_stride=12, models=("tfmixer", "no_gfm"),
                                co2_models=("tfmixer", "no_gfm"), physionet_steps=0)  # PhysioNet: test_imts_physionet
    state = torch.random.get_rng_state()
    result = exp.run_experiment(RunConfig(mode="quick", seeds=(0,), out_dir=tmp_path), small)
    assert torch.equal(torch.random.get_rng_state(), state)  # seeded in a fork: the global RNG is untouched
    assert len(result.claims) == 4
    # at this size (seeds 0-2 measured): TFMixer/no-GFM 0.60-0.63 / 0.84-0.89, vs LOCF 1.0-1.1,
    # frequency distance 0.06-0.07 from 0.23, CO2 0.33-0.38 / 0.73-0.81: every claim holds with a margin
    for claim in result.claims:
        assert claim.holds, (claim.statement, claim.measured, claim.reference)
    assert result.metrics["tfmixer_train_series_per_second_cpu"] > 0
    assert set(result.figures) == {"synthetic_forecasts", "learnt_spectrum", "co2_forecast"}


@pytest.mark.parametrize("steps", [1, 2, 3, 10, 11])
def test_train_forecaster_runs_short_budgets(steps):
    """A short run trains: the one-cycle warm-up is at least one scheduler step (10 steps at 10 % used to divide
    by a zero-length warm-up), and 1 or 2 steps keep the learning rate constant."""
    from icml26.training.tfmixer import train_forecaster

    cfg = SyntheticIMTSConfig(num_channels=2, num_queries=(2, 4), rate_range=(5.0, 10.0))
    splits = make_synthetic_imts((6, 3, 2), cfg, seed=0)
    model = TFMixerForForecasting(TFMixerConfig(num_channels=2, d_model=8, num_frequencies=4, num_patches=4,
                                                num_query_patches=2, num_heads=2, time_embedding_dim=4,
                                                nudft_backend="torch"))
    before = [p.detach().clone() for p in model.parameters()]
    out = train_forecaster(model, splits, steps=steps, batch_size=2, lr=1e-2, eval_every=steps, patience=1, seed=0,
                           device="cpu", validate_initial=True)
    assert out.steps == steps and math.isfinite(out.val_mse)
    assert [s for s, _ in out.val_history] == [0, steps]
    if out.val_history[-1][1] < out.val_history[0][1]:  # the trained weights were kept: they moved
        assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


def _small_training_setup():
    """Small synthetic splits and a factory of one seeded tiny TFMixer (the training-loop tests)."""
    cfg = SyntheticIMTSConfig(num_channels=2, num_queries=(2, 4), rate_range=(5.0, 10.0))
    splits = make_synthetic_imts((16, 6, 2), cfg, seed=0)

    def model():
        torch.manual_seed(0)
        return TFMixerForForecasting(TFMixerConfig(num_channels=2, d_model=8, num_frequencies=4, num_patches=4,
                                                    num_query_patches=2, num_heads=2, time_embedding_dim=4,
                                                    nudft_backend="torch"))

    return splits, model


@pytest.mark.parametrize("ema_decay", [None, 0.8])
def test_train_forecaster_resumes_from_its_checkpoint(tmp_path, ema_decay):
    """A run stopped after its checkpoint (a killed run) and called again returns what an uninterrupted run
    returns: the same curve, best step and weights (with a moving average of the weights too); a checkpoint
    of other settings is refused."""
    from icml26.errors import InputError
    from icml26.training.tfmixer import train_forecaster

    splits, model = _small_training_setup()
    kw = dict(steps=12, batch_size=4, lr=1e-2, eval_every=3, patience=10, seed=1, device="cpu", validate_initial=True,
              ema_decay=ema_decay)
    whole_model = model()
    whole = train_forecaster(whole_model, splits, **kw)
    ckpt = tmp_path / "run.ckpt"
    first = model()
    train_forecaster(first, splits, **{**kw, "steps": 12}, checkpoint=ckpt, checkpoint_every=6)
    state = torch.load(ckpt, weights_only=False)
    assert state["counters"][0] == 12
    # a run killed after step 6: its checkpoint holds step 6; a fresh process resumes from it
    cut = model()
    import icml26.training.tfmixer as tt

    calls = []

    def stop_after_six(*args, **kwargs):
        out = real(*args, **kwargs)
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt  # the kill, right after the step-6 checkpoint was written
        return out

    real, ckpt2 = tt.atomic_write_bytes, tmp_path / "cut.ckpt"
    tt.atomic_write_bytes = stop_after_six
    try:
        with pytest.raises(KeyboardInterrupt):
            train_forecaster(cut, splits, **kw, checkpoint=ckpt2, checkpoint_every=6)
    finally:
        tt.atomic_write_bytes = real
    assert torch.load(ckpt2, weights_only=False)["counters"][0] == 6
    resumed_model = model()
    resumed = train_forecaster(resumed_model, splits, **kw, checkpoint=ckpt2, checkpoint_every=6)
    assert resumed.val_history == whole.val_history and resumed.best_step == whole.best_step
    assert resumed.steps == whole.steps == 12 and resumed.schedule_steps == 12
    for a, b in zip(whole_model.state_dict().values(), resumed_model.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    with pytest.raises(InputError, match="checkpoint: expected a checkpoint of a run with these settings"):
        train_forecaster(model(), splits, **{**kw, "lr": 2e-2}, checkpoint=ckpt2)
    with pytest.raises(InputError, match="checkpoint: expected a checkpoint of a run with these settings"):
        train_forecaster(model(), splits, **{**kw, "ema_decay": 0.5}, checkpoint=ckpt2)
    other = TFMixerForForecasting(TFMixerConfig(**{**model().config.to_dict(), "initializer_range": 0.2}))
    with pytest.raises(InputError, match="checkpoint: expected a checkpoint of a run with these settings"):
        train_forecaster(other, splits, **kw, checkpoint=ckpt2)  # the same shapes, another model


def test_train_forecaster_keeps_the_moving_average_of_the_weights():
    """``ema_decay=d`` returns e_N with e_1 = p_1 and e_k = d_k e_(k-1) + (1 - d_k) p_k over the raw weights p_k
    after each optimiser step (recorded by a step hook), d_k = min(d, 1 - k^(-2/3)) (ema-pytorch's warm-up);
    ``ema_decay=0`` gives the raw run back exactly."""
    from torch.optim.optimizer import register_optimizer_step_post_hook

    from icml26.training.tfmixer import train_forecaster

    splits, model = _small_training_setup()
    kw = dict(steps=5, batch_size=4, lr=1e-2, eval_every=5, patience=10, seed=1, device="cpu")
    raw_model, snapshots = model(), []
    handle = register_optimizer_step_post_hook(
        lambda opt, args, kwargs: snapshots.append({k: p.detach().clone() for k, p in raw_model.named_parameters()}))
    try:
        raw = train_forecaster(raw_model, splits, **kw)
    finally:
        handle.remove()
    assert len(snapshots) == 5
    averaged_model = model()
    averaged = train_forecaster(averaged_model, splits, **kw, ema_decay=0.7)
    for key, param in averaged_model.named_parameters():
        expected = snapshots[0][key]
        for k, snap in enumerate(snapshots[1:], start=2):
            decay = min(0.7, 1 - k ** (-2 / 3))
            expected = decay * expected + (1 - decay) * snap[key]
        torch.testing.assert_close(param.detach(), expected, rtol=1e-5, atol=1e-6)
    assert averaged.val_mse != raw.val_mse  # the average is validated, not the raw weights
    moved = [k for k, p in averaged_model.named_parameters() if not torch.equal(p, dict(raw_model.named_parameters())[k])]
    assert moved  # negative control: the kept weights are not the raw ones
    zero_model = model()
    zero = train_forecaster(zero_model, splits, **kw, ema_decay=0.0)
    assert zero.val_history == raw.val_history
    for a, b in zip(raw_model.state_dict().values(), zero_model.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize("bad", [1.0, -0.1, float("nan"), 1.5])
def test_train_forecaster_refuses_a_bad_ema_decay(bad):
    from icml26.errors import InputError
    from icml26.training.tfmixer import train_forecaster

    splits, model = _small_training_setup()
    with pytest.raises(InputError, match="ema_decay"):
        train_forecaster(model(), splits, steps=2, batch_size=4, lr=1e-2, eval_every=2, patience=1, seed=0,
                         device="cpu", ema_decay=bad)
