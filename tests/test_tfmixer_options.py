"""TFMixer's options for sparse real data (``models/tfmixer/modeling.py``): sparse decoding, the forecast
level (a residual over LOCF), the per-channel fallback for empty channels, the per-variable loss,
and the mmap-threshold fix for variable-shape CPU training (``icml26.utils``)."""

import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from icml26.errors import InputError  # noqa: E402
from icml26.models.tfmixer import HistoryMeanForecaster, LOCFForecaster, MTANForecaster  # noqa: E402
from icml26.models.tfmixer import (  # noqa: E402
    TFMixerConfig,
    TFMixerForForecasting,
    bucketed_nonzero,
    masked_mse,
    squared_error_loss,
)
from icml26.utils import fix_malloc_mmap_threshold  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SMALL = dict(num_channels=3, d_model=16, num_frequencies=8, num_patches=8, num_query_patches=4, time_embedding_dim=8)


def _batch(b=4, length=20, c=3, h=6, seed=0, density=0.3):
    gen = torch.Generator().manual_seed(seed)
    times = torch.sort(torch.rand(b, length, generator=gen), -1).values
    mask = torch.rand(b, length, c, generator=gen) < density
    mask[:, 0, 0] = True
    mask[1, :, 2] = False  # an empty channel
    values = torch.where(mask, torch.randn(b, length, c, generator=gen), float("nan"))
    query_times = 1 + torch.rand(b, h, generator=gen)
    targets = torch.randn(b, h, c, generator=gen)
    target_mask = torch.rand(b, h, c, generator=gen) < 0.4
    target_mask[0, 0, 1] = True
    return dict(values=values, times=times, mask=mask, query_times=query_times, targets=targets,
                target_mask=target_mask)


def _model(seed=0, **overrides):
    torch.manual_seed(seed)
    return TFMixerForForecasting(TFMixerConfig(**{**SMALL, **overrides}))


@pytest.mark.parametrize("overrides", [{}, {"frequency_layout": "per_channel"}, {"use_gfm": False},
                                       {"loss_reduction": "per_variable", "forecast_level": "last"}])
def test_sparse_decoding_gives_the_dense_loss_and_gradients(overrides):
    batch = _batch()
    dense, sparse = _model(**overrides), _model(**overrides, sparse_decoding=True)
    sparse.load_state_dict(dense.state_dict())
    out_d, out_s = dense(**batch), sparse(**batch)
    torch.testing.assert_close(out_s.loss, out_d.loss, rtol=1e-5, atol=1e-7)
    if out_d.reconstruction_loss is not None:
        torch.testing.assert_close(out_s.reconstruction_loss, out_d.reconstruction_loss, rtol=1e-5, atol=1e-7)
    tm = batch["target_mask"]
    torch.testing.assert_close(out_s.forecasts[tm], out_d.forecasts[tm], rtol=1e-5, atol=1e-6)
    assert torch.isnan(out_s.forecasts[~tm]).all()  # not computed, and says so
    out_d.loss.backward()
    out_s.loss.backward()
    for (name, p_d), p_s in zip(dense.named_parameters(), sparse.parameters()):
        if p_d.grad is None:
            assert p_s.grad is None or not p_s.grad.any(), name
            continue
        torch.testing.assert_close(p_s.grad, p_d.grad, rtol=1e-4, atol=1e-7, msg=name)
    # without targets every slot is forecast, sparse or not
    no_targets = {k: v for k, v in batch.items() if k not in ("targets", "target_mask")}
    torch.testing.assert_close(sparse(**no_targets).forecasts, dense(**no_targets).forecasts)


def test_bucketed_nonzero_pads_to_the_bucket_and_keeps_the_order():
    mask = torch.zeros(3, 4, 5, dtype=torch.bool)
    mask[0, 1, 2] = mask[2, 3, 4] = mask[1, 0, 0] = True
    (i, j, k), n = bucketed_nonzero(mask, 4)
    assert n == 3 and i.shape == (4,)
    assert [tuple(z) for z in torch.stack([i, j, k], 1)[:n].tolist()] == [(0, 1, 2), (1, 0, 0), (2, 3, 4)]
    assert torch.stack([i, j, k], 1)[n:].eq(0).all()  # dummies point at slot 0
    assert bucketed_nonzero(mask, 3)[0][0].shape == (3,)  # an exact multiple: no padding
    assert bucketed_nonzero(torch.zeros(2, 2, dtype=torch.bool), 8)[0][0].shape == (8,)  # one bucket at least
    with pytest.raises(InputError, match="bucketed_nonzero: bucket: expected a positive int"):
        bucketed_nonzero(mask, 0)


@pytest.mark.parametrize("sparse", [False, True])
def test_bucketed_point_lists_change_no_output_loss_or_gradient(monkeypatch, sparse):
    """Buckets of 1 (no dummies) and of 64 (most entries dummies) give the same model."""
    import icml26.models.tfmixer.modeling as tfm

    batch = _batch(b=6, length=30, seed=3)
    results = []
    for bucket in (1, 64):
        monkeypatch.setattr(tfm, "SLOT_BUCKET", bucket)
        model = _model(seed=4, sparse_decoding=sparse, forecast_level="blend", loss_reduction="per_variable")
        for p in model.parameters():  # away from the zero initialisations, so every path carries gradient
            torch.nn.init.normal_(p, std=0.3, generator=torch.Generator().manual_seed(p.numel()))
        out = model(**batch)
        out.loss.backward()
        results.append((out, {n: p.grad for n, p in model.named_parameters() if p.grad is not None}))
    (a, grads_a), (b, grads_b) = results
    torch.testing.assert_close(a.loss, b.loss, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(a.forecasts, b.forecasts, rtol=1e-5, atol=1e-6, equal_nan=True)
    assert grads_a.keys() == grads_b.keys()
    for name in grads_a:
        torch.testing.assert_close(grads_a[name], grads_b[name], rtol=1e-4, atol=1e-5, msg=name)


def _silent(**overrides):
    """A time-only model whose decoder outputs 0: its forecasts are its level."""
    model = _model(use_gfm=False, **overrides)
    with torch.no_grad():
        model.decoder.mlp[-1].weight.zero_()
        model.decoder.mlp[-1].bias.zero_()
    return model


def test_forecast_level_last_with_a_silent_decoder_is_locf_with_the_fallback():
    batch = _batch()
    fallback = [0.25, -0.5, 0.75]
    model = _silent(forecast_level="last", channel_fallback=fallback)
    out = model(batch["values"], batch["times"], batch["mask"], batch["query_times"])
    locf = LOCFForecaster(fill_value=fallback)(batch["values"], batch["times"], batch["mask"], batch["query_times"])
    torch.testing.assert_close(out.forecasts, locf.forecasts)
    assert torch.allclose(out.forecasts[1, :, 2], torch.tensor(0.75))  # the empty channel
    # the negative control: the mean level is not LOCF on this batch
    mean_model = _model(use_gfm=False, channel_fallback=fallback)
    mean_model.load_state_dict(model.state_dict())
    other = mean_model(batch["values"], batch["times"], batch["mask"], batch["query_times"]).forecasts
    assert not torch.allclose(other, locf.forecasts)


def test_blend_level_starts_as_locf_and_spans_the_history_and_population_means():
    batch = _batch()
    fallback = [0.25, -0.5, 0.75]
    model = _silent(forecast_level="blend", channel_fallback=fallback)
    args = (batch["values"], batch["times"], batch["mask"], batch["query_times"])
    torch.testing.assert_close(model(*args).forecasts, LOCFForecaster(fill_value=fallback)(*args).forecasts)
    with torch.no_grad():
        model.level_mix.copy_(torch.tensor([[1.0, 0.0, 0.0]] * 3))  # all the way to the stay's mean
    torch.testing.assert_close(model(*args).forecasts, HistoryMeanForecaster(fill_value=fallback)(*args).forecasts)
    with torch.no_grad():
        model.level_mix.copy_(torch.tensor([[0.0, 1.0, 0.1]] * 3))  # to the population's, plus an offset
    expected = torch.tensor(fallback) + 0.1
    torch.testing.assert_close(model(*args).forecasts[0], expected.expand(6, 3))
    assert torch.allclose(model(*args).forecasts[1, :, 2], torch.tensor(0.75))  # empty: the fallback alone
    out = model(**batch)
    out.loss.backward()
    assert model.level_mix.grad is not None and model.level_mix.grad.abs().sum() > 0


def test_channel_fallback_is_learnt_and_saved(tmp_path):
    model = _model(channel_fallback=[1.0, 2.0, 3.0])
    assert model.channel_fallback.requires_grad
    torch.testing.assert_close(model.channel_fallback.detach(), torch.tensor([1.0, 2.0, 3.0]))
    with torch.no_grad():
        model.channel_fallback.add_(0.5)
    model.save_pretrained(tmp_path)
    again = TFMixerForForecasting.from_pretrained(tmp_path)
    torch.testing.assert_close(again.channel_fallback, model.channel_fallback)
    assert again.config.channel_fallback == [1.0, 2.0, 3.0]


def test_per_variable_loss_is_the_mean_of_channel_means():
    gen = torch.Generator().manual_seed(3)
    pred, target = torch.randn(2, 5, 3, generator=gen), torch.randn(2, 5, 3, generator=gen)
    mask = torch.zeros(2, 5, 3, dtype=torch.bool)
    mask[0, :, 0] = True  # 5 targets on channel 0
    mask[1, 2, 1] = True  # 1 on channel 1, none on channel 2
    err = (pred - target).pow(2)
    expected = (err[0, :, 0].mean() + err[1, 2, 1]) / 2
    torch.testing.assert_close(masked_mse(pred, target, mask, "per_variable"), expected)
    torch.testing.assert_close(masked_mse(pred, target, mask), err[mask].mean())  # pooled weighs channel 0 5x
    assert masked_mse(pred, target, torch.zeros_like(mask), "per_variable") == 0
    with pytest.raises(InputError, match="reduction"):
        squared_error_loss(err[mask], mask.nonzero()[:, -1], 3, "median")


def test_mtan_takes_the_fallback_and_the_loss_reduction():
    batch = _batch()
    torch.manual_seed(0)
    a = MTANForecaster(3, hidden_size=8, num_reference=6, time_dim=6)
    torch.manual_seed(0)
    b = MTANForecaster(3, hidden_size=8, num_reference=6, time_dim=6, fill_value=[0.0, 0.0, 5.0],
                       loss_reduction="per_variable")
    fa, fb = a(**batch), b(**batch)
    torch.testing.assert_close(fb.forecasts[1, :, 2] - fa.forecasts[1, :, 2], torch.full((6,), 5.0))
    torch.testing.assert_close(fb.forecasts[0], fa.forecasts[0])  # no empty channel there
    with pytest.raises(InputError, match="loss_reduction"):
        MTANForecaster(3, loss_reduction="sum")


@pytest.mark.parametrize("field, value", [("forecast_level", "first"), ("loss_reduction", "sum"),
                                          ("channel_fallback", [1.0, 2.0]), ("channel_fallback", [1.0, float("nan"), 0.0]),
                                          ("channel_fallback", "abc"), ("sparse_decoding", 1)])
def test_config_refuses_bad_options(field, value):
    with pytest.raises(InputError, match=field):
        TFMixerConfig(**{**SMALL, field: value})


def test_fix_malloc_mmap_threshold_refuses_bad_input():
    with pytest.raises(InputError, match="threshold"):
        fix_malloc_mmap_threshold(0)
    with pytest.raises(InputError, match="threshold"):
        fix_malloc_mmap_threshold(True)
    with pytest.raises(InputError, match="threshold"):
        fix_malloc_mmap_threshold(64 * 1024 * 1024)


@pytest.mark.slow
def test_fix_malloc_mmap_threshold_keeps_memory_flat():
    if not sys.platform.startswith("linux"):
        pytest.skip("glibc's mallopt: Linux only")
    # In a fresh process (the setting is process-wide): buffers of ever-changing sizes between
    # 0.2 and 4 MB, allocated and freed in turn, hold on to heap memory unless the threshold is pinned.
    script = textwrap.dedent("""
        import os, sys, torch
        from icml26.utils import fix_malloc_mmap_threshold
        if sys.argv[1] == "fix":
            assert fix_malloc_mmap_threshold()
        def rss():
            return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        gen = torch.Generator().manual_seed(0)
        keep = []
        torch.empty(8_000_000, dtype=torch.uint8).fill_(1)  # one big free raises glibc's threshold
        start = rss()
        for step in range(60):
            sizes = torch.randint(200_000, 4_000_000, (12,), generator=gen).tolist()
            bufs = [torch.empty(n, dtype=torch.uint8).fill_(1) for n in sizes]
            keep = [bufs[i] for i in range(0, 12, 5)]  # a few survive to the next step, as activations do
            del bufs
        print(rss() - start)
    """)
    # Measured here: 7 MB pinned, 29 MB with glibc's default (which a pinned threshold that did not
    # take effect would give too); on PhysioNet batches the default grew by 1 GB in 80 steps.
    out = subprocess.run([sys.executable, "-c", script, "fix"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.split()[-1]) < 16e6


def test_mean_reversion_baseline_recovers_known_coefficients():
    from icml26.models.tfmixer.baselines import _last_and_mean
    from icml26.models.tfmixer import IMTSDataset, MeanReversionForecaster

    batch = _batch(b=40, seed=5, density=0.5)
    batch["mask"][:, 0, :] = True  # every channel observed
    values = torch.where(batch["mask"], torch.randn(batch["mask"].shape, generator=torch.Generator().manual_seed(1)), 0.0)
    last, mean = _last_and_mean(values, batch["times"], batch["mask"])
    fill = torch.tensor([0.3, -0.2, 0.1])
    truth = torch.tensor([[0.5, 0.0, 0.0], [0.2, 0.3, 0.05], [0.0, 0.0, -0.1]])
    level = last + truth[:, 0] * (mean - last) + truth[:, 1] * (fill - last) + truth[:, 2]
    targets = level[:, None].expand(-1, 6, -1).clone()
    samples = [{"values": values[i], "times": batch["times"][i], "mask": batch["mask"][i],
                "query_times": batch["query_times"][i], "targets": targets[i],
                "target_mask": torch.ones(6, 3, dtype=torch.bool)} for i in range(40)]
    data = IMTSDataset(samples, ["a", "b", "c"])
    model = MeanReversionForecaster(fill_value=fill)
    args = (values, batch["times"], batch["mask"], batch["query_times"])
    torch.testing.assert_close(model(*args).forecasts, LOCFForecaster(fill_value=fill)(*args).forecasts)  # unfitted
    model.fit(data, batch_size=16)  # in batches: the same normal equations
    torch.testing.assert_close(model.coef, truth, atol=1e-4, rtol=0)
    torch.testing.assert_close(model(*args).forecasts, targets, atol=1e-5, rtol=0)
