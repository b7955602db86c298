"""Figures of `canis evaluate controllers`: footfall diagrams at the paper's gait speeds (its
Fig. 2) and the experts' blending weights over time (its Fig. 9)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from canis.runtime.features import FPS
from canis.training.labels import PAW_NAMES
from canis.training.report import pyplot, true_spans

FOOTFALL_SECONDS = 2.0


def plot_footfalls(contacts: dict[str, dict[str, np.ndarray]], results: dict, folder: Path):
    """contacts[model][speed] (F, 4): a grid of footfall diagrams, models by speeds, each
    titled with the gait classifier's verdict."""
    plt = pyplot()
    models = list(contacts)
    speeds = list(next(iter(contacts.values())))
    fig, axes = plt.subplots(
        len(models), len(speeds), figsize=(3.2 * len(speeds), 1.5 * len(models)), squeeze=False
    )
    frames = int(FOOTFALL_SECONDS * FPS)
    for row, model in enumerate(models):
        for col, speed in enumerate(speeds):
            ax = axes[row, col]
            shown = contacts[model][speed][:frames]
            for paw in range(shown.shape[1]):
                bars = [(s / FPS, (e - s) / FPS) for s, e in true_spans(shown[:, paw])]
                ax.broken_barh(bars, (paw - 0.4, 0.8), color="k")
            gait = results[model]["gaits"][speed]
            ax.set_title(
                f"{model} {speed} m/s: {gait['verdict']} ({gait['share']:.0%})", fontsize=8
            )
            ax.set_yticks(
                range(len(PAW_NAMES)), [p.replace("_", " ") for p in PAW_NAMES], fontsize=6
            )
            ax.set_xlim(0, FOOTFALL_SECONDS)
            ax.invert_yaxis()
            ax.tick_params(axis="x", labelsize=6)
    fig.suptitle("Footfalls (black: paw on the ground), 2 s after 3 s of settling", fontsize=9)
    fig.tight_layout()
    path = folder / "footfalls.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def plot_activations(profiles: dict[str, dict[str, np.ndarray]], folder: Path):
    """profiles[model][action] (F, K): each expert's blending weight over time."""
    plt = pyplot()
    models = list(profiles)
    actions = list(next(iter(profiles.values())))
    fig, axes = plt.subplots(
        len(actions), len(models), figsize=(5 * len(models), 1.7 * len(actions)), squeeze=False
    )
    for col, model in enumerate(models):
        for row, action in enumerate(actions):
            ax = axes[row, col]
            weights = profiles[model][action]
            seconds = np.arange(len(weights)) / FPS
            for k in range(weights.shape[1]):
                ax.plot(seconds, weights[:, k], lw=1.0, label=f"expert {k + 1}")
            ax.set_ylim(0, 1)
            ax.set_title(f"{model}: {action}", fontsize=8)
            ax.tick_params(labelsize=6)
        axes[0, col].legend(fontsize=5, ncol=4, loc="upper right")
        axes[-1, col].set_xlabel("seconds", fontsize=7)
    fig.tight_layout()
    path = folder / "expert_activations.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
