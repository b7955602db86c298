"""The dataset as training reads it: standardised tensors on the training device, split into
training and validation rows (training/dataset.py), and the input range the export clamps to."""

from __future__ import annotations

import numpy as np
import torch
from canis.training.dataset import balanced_weights, split_rows
from canis.training.dataset import load as load_dataset
from canis.training.labels import ACTIONS


class TrainingData:
    """Standardised tensors on the training device, split into training and validation rows."""

    def __init__(
        self,
        path: str,
        kind: str,
        device: torch.device,
        holdout: str = "clips",
        mirrored: bool = True,
    ):
        data = load_dataset(path)
        self.metadata = data.metadata
        x = (data["X"] - data["x_mean"]) / data["x_std"]
        y = (data["Y"] - data["y_mean"]) / data["y_std"]
        self.normalisation = {
            "x_mean": data["x_mean"],
            "x_std": data["x_std"],
            "y_mean": data["y_mean"],
            "y_std": data["y_std"],
        }
        # The exported graph clamps its input to the range seen in training (see
        # export/onnx_export.py): a closed loop that leaves it otherwise runs away.
        # Held-out clips (`validation`) are every run's validation set, so runs compare on
        # the same rows; `within` is the within-clip one (training/dataset.py). The
        # standardisation stays the dataset's (all rows of the training clips).
        training, within = split_rows(data.arrays, holdout, mirrored)
        self.normalisation |= input_range(data["X"][training])
        validation = data["validation"]
        if kind == "pfnn":  # the phase increment is an extra, standardised output
            delta = data["phase_delta"][:, None]
            mean, std = delta[training].mean(0), delta[training].std(0) + 1e-6
            y = np.concatenate([y, (delta - mean) / std], axis=1)
            self.normalisation |= {"phase_delta_mean": mean, "phase_delta_std": std}
        self.normalisation = {
            k: torch.as_tensor(np.asarray(v, dtype=np.float32))
            for k, v in self.normalisation.items()
        }

        def as_tensor(array):
            return torch.as_tensor(np.ascontiguousarray(array, dtype=np.float32), device=device)

        self.x_train, self.y_train = as_tensor(x[training]), as_tensor(y[training])
        self.x_val, self.y_val = as_tensor(x[validation]), as_tensor(y[validation])
        self.phase_train = as_tensor(data["phase"][training])
        self.phase_val = as_tensor(data["phase"][validation])
        self.x_within, self.y_within = as_tensor(x[within]), as_tensor(y[within])
        self.phase_within = as_tensor(data["phase"][within])
        self.weights = torch.as_tensor(data["sample_weight"][training], dtype=torch.float64)
        # `canis train` balanced sampling (training/dataset.py balanced_weights)
        balanced = balanced_weights(data["gait"][training], data["action"][training])
        self.balanced_weights = torch.as_tensor(balanced, dtype=torch.float64)
        # Marked by `canis dataset build` (training/labels.py); absent from older datasets.
        sniffing = data.arrays.get("sniffing", np.zeros(len(data["X"]), dtype=bool))
        self.sniffing = torch.as_tensor(sniffing[training])
        # None in datasets built before the slow walks were marked (train() refuses them).
        walks = data.arrays.get("sniffing_walk")
        self.sniffing_walk = None if walks is None else torch.as_tensor(walks[training])
        self.jumping = torch.as_tensor(data["action"][training] == ACTIONS.index("jump"))


def input_range(x_train: np.ndarray) -> dict[str, np.ndarray]:
    return {"x_min": x_train.min(axis=0), "x_max": x_train.max(axis=0)}
