"""The posture-stillness term (issue 17): the runtime's own dogs taken to a sit, a lie or a beg
through the transition network and left there, kept as still as the placed-stillness term keeps
a standing dog.

(PM), a network with the mocap's four gaits that passed every other gate, failed the demo's
test of a posture asked on the hills: its beg still moved at 0.1005 m/s after 2 s held (0.1
allowed). A one-off probe (AMD EPYC family 25 model 17: the demo's way, W held at 0, 1.1, 1.9
or 3.3 m/s for 2-4.5 s on the hills, then the posture key, the root speed 2 s after the
hand-back; the postures table of `canis evaluate transitions --handback-only` now gives it as
its *held* column) found that drift the same from every start, 0.100-0.101 m/s, where (GS10),
shipped then, begs at 0.032-0.033 (sits 0.048-0.049, lies 0.027-0.028). So it is where the network
settles when asked to hold the posture, not what it brings from the gait: no term looked there.
The getting-up term's settling dogs (training/getting_up_pops.py) hold a posture for a second
after the hand-back, but its bar is a joint's pop, and a root sliding at 0.1 m/s moves 1.7 mm a
frame. The mocap's own dogs labelled sit, lie and stand (the beg's action) move their root at a
median 0.018, 0.011 and 0.035 m/s (data/dog_dataset.npz, every row of each).

So each refresh the network exported from the current weights drives `--placed-dogs` dogs as
the getting-up term's settling dogs (standing a while, then a posture through the shipped
transition network, held, never stood up), and keeps their first KEPT_FRAMES steps after the
hand-back: the demo's test reads the speed 2 s in. The term is the placed-stillness term's
(training/placed_stillness.py: each joint's turn beyond its allowance and the root's step
beyond its own, squared) over those steps, unrolled as the moving dogs' terms are. One epoch of
(PM)'s recipe with it at 1 brought the beg to 0.008-0.010 m/s and every posture under 0.015
((PX1), from which the MANN-8 shipped since 2026-11-30 was tuned: docs/RESULTS.md, the
thirty-second session).
"""

from __future__ import annotations

import numpy as np
import torch
from canis.training.getting_up_pops import GettingUpDogs, getting_up_inputs
from canis.training.placed_speed import OwnDraws
from canis.training.placed_stillness import placed_stillness_loss

KEPT_FRAMES = 180  # from the hand-back: the demo's test reads the root's speed at 120
# Its own draws' key (placed_speed.OwnDraws): the getting-up term's are the key ()'s, which
# these would otherwise repeat.
DRAWS_KEY = 7_211


class PostureDogs(GettingUpDogs):
    """Each refresh's dogs holding a posture, and the posture-stillness term over a batch of
    their unrolled steps."""

    kept_frames = KEPT_FRAMES

    def __init__(self, model, saved, data, standard, run_dir, dogs, unroll: int):
        super().__init__(
            model, saved, data, standard, run_dir, dogs, None, unroll, settling_share=1.0
        )
        self.path = self.path.with_name("posture.onnx")
        self.draws = OwnDraws(DRAWS_KEY)

    def _driven(self, generator: np.random.Generator):
        return getting_up_inputs(
            self.path, None, self.dogs, generator, self.phases, 1.0, self.kept_frames
        )

    def loss(self, predict, dogs: int, generator: np.random.Generator) -> torch.Tensor:
        """placed_stillness_loss over `dogs` of this refresh's dogs (drawn by its own
        generator, not `generator`)."""
        _, x_raw, y_raw, _ = self._drawn_steps(predict, dogs, self.generator)
        return placed_stillness_loss(x_raw, y_raw)
