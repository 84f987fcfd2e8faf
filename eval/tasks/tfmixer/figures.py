"""TFMixer's figures: synthetic forecasts, the learnt spectrum, a CO2 window, PhysioNet validation curves.

The experiment (:mod:`icml26.eval.experiments.tfmixer`) draws them from its runs; names come in as ``labels``.
"""

from __future__ import annotations

__all__ = ["co2_figure", "dense_forecast", "forecast_figure", "physionet_figure", "spectrum_figure"]


def dense_forecast(model, sample, tau, device):
    import torch

    batch = {k: sample[k][None].to(device) for k in ("values", "times", "mask")}
    with torch.no_grad():
        model.eval()
        return model(**batch, query_times=torch.as_tensor(tau, dtype=torch.float32)[None].to(device)).forecasts[0].cpu()


def forecast_figure(splits, models, device, labels: dict[str, str]):
    """Synthetic test series: TFMixer's and no-GFM's forecasts at arbitrary times against the true signal."""
    import numpy as np
    from matplotlib.figure import Figure

    from icml26.eval.tasks.tfmixer import synthetic_signal

    test, info = splits.test, splits.test.info
    picks = [(i, c) for i in range(3) for c in range(2)]
    fig = Figure(figsize=(12, 7), layout="constrained")
    axes = fig.subplots(3, 2, sharex=True)
    dense_h, dense_f = np.linspace(0, 1, 200), np.linspace(1, 1.5, 100)
    shown = [n for n in ("tfmixer", "no_gfm") if n in models]
    for ax, (i, c) in zip(axes.flat, picks):
        s = test[i]
        truth = synthetic_signal(info["params"], i, np.concatenate([dense_h, dense_f]), info["frequencies"])[:, c]
        ax.plot(np.concatenate([dense_h, dense_f]), truth, color="0.6", lw=1, label="true signal")
        m = s["mask"][:, c]
        ax.plot(s["times"][m], s["values"][m, c], "k.", ms=4, label="observed history")
        tm = s["target_mask"][:, c]
        ax.plot(s["query_times"][tm], s["targets"][tm, c], "kx", ms=5, label="targets")
        for name, color in zip(shown, ("C0", "C3")):
            ax.plot(dense_f, dense_forecast(models[name], s, dense_f, device)[:, c], color=color, lw=1.5,
                    label=labels[name])
        ax.axvline(1.0, color="0.8", ls="--", lw=0.8)
        ax.set_title(f"test series {i}, channel {c}", fontsize=9)
    axes.flat[0].legend(fontsize=7, loc="upper left")
    fig.suptitle("Synthetic IMTS: forecasts at arbitrary times (1, 1.5] vs the true signal")
    return fig


def spectrum_figure(model, splits, rows, device):
    """The learnt frequencies (height: mean NUDFT magnitude on test) against the generator's."""
    import numpy as np
    import torch
    from matplotlib.figure import Figure

    from icml26.models.tfmixer import IMTSCollator

    samples = [splits.test[i] for i in range(min(200, len(splits.test)))]
    batch = {k: v.to(device) for k, v in IMTSCollator()(samples).items()}
    mask = batch["mask"].transpose(1, 2)
    with torch.no_grad():
        x = torch.where(mask, batch["values"].transpose(1, 2), 0.0)
        level = x.sum(-1, keepdim=True) / mask.sum(-1, keepdim=True).clamp(min=1)
        real, imag = model.gfm.nudft(torch.where(mask, x - level, 0.0), batch["times"][:, None], mask)
        magnitude = (2 * torch.sqrt(real ** 2 + imag ** 2)).mean((0, 1)).cpu().numpy()
    final, init = np.asarray(rows["tfmixer"]["cycles_final"]), np.asarray(rows["tfmixer"]["cycles_init"])
    fig = Figure(figsize=(9, 3.8), layout="constrained")
    ax = fig.subplots()
    ax.vlines(init, 0, magnitude.max() * 0.15, color="0.7", lw=2, label="initial frequencies (harmonics)")
    ax.vlines(final, 0, magnitude, color="C0", lw=2, label="learnt frequencies (height: mean |2X_k| on test)")
    for j, f in enumerate(splits.info["frequencies"]):
        ax.axvline(f, color="C3", ls="--", lw=1, label="true frequencies" if j == 0 else None)
    ax.set_xlabel("cycles per history window")
    ax.set_ylabel("mean NUDFT magnitude")
    ax.set_title("GFM: learnt spectrum vs the generator's frequencies")
    ax.legend(fontsize=8)
    return fig


def physionet_figure(curves, median, labels: dict[str, str], reference: tuple[str, float]):
    """Validation curves (seed 0) with LOCF's and the history mean's test MSE and an outside ``reference`` (label, MSE)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 3.8), layout="constrained")
    ax = fig.subplots()
    for i, (name, curve) in enumerate(curves.items()):
        steps, values = zip(*curve)
        ax.plot(steps, values, color=f"C{i}", label=f"{labels[name]} (validation, seed 0)")
    for name, style in (("locf", "--"), ("mean", ":")):
        ax.axhline(median[name], color="0.4", ls=style, lw=1, label=f"{labels[name]} (test, median)")
    ax.axhline(reference[1], color="C3", ls="-.", lw=1, label=reference[0])
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("per-variable MSE (min-max scale)")
    ax.set_title("PhysioNet 2012, t-PatchGNN protocol")
    ax.legend(fontsize=7)
    return fig


def co2_figure(co2, models, device, labels: dict[str, str]):
    """A CO2 test window: TFMixer's and no-GFM's 52-week forecasts."""
    import numpy as np
    from matplotlib.figure import Figure

    s = co2.test[len(co2.test) // 2]
    fig = Figure(figsize=(9, 3.8), layout="constrained")
    ax = fig.subplots()
    m, tm = s["mask"][:, 0], s["target_mask"][:, 0]
    ax.plot(s["times"][m], s["values"][m, 0], "k.", ms=4, label="observed history (50% kept)")
    ax.plot(s["query_times"][tm], s["targets"][tm, 0], "kx", ms=4, label="truth")
    tau = np.asarray(s["query_times"])
    for name, color in (("tfmixer", "C0"), ("no_gfm", "C3")):
        if name in models:
            ax.plot(tau, dense_forecast(models[name], s, tau, device)[:, 0], color=color, lw=1.5, label=labels[name])
    ax.axvline(1.0, color="0.8", ls="--", lw=0.8)
    ax.set_xlabel("time (history window = [0, 1), 156 weeks)")
    ax.set_ylabel("CO2 (window-normalised)")
    ax.set_title("Mauna Loa CO2, a test window: 52-week forecast")
    ax.legend(fontsize=8)
    return fig
