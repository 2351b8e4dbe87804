"""The RLinf adapters of the tiny models, by model name, for the adapter tests."""

from __future__ import annotations

from dexrl.bridge.policies.dm0 import Dm0RLPolicy
from dexrl.bridge.policies.flow import FlowRLPolicy
from dexrl.bridge.policies.pi0 import Pi0RLPolicy

ADAPTERS: dict[str, type[FlowRLPolicy]] = {"pi0": Pi0RLPolicy, "dm0": Dm0RLPolicy}
NUM_STEPS = {"pi0": 4, "dm0": 3}  # denoising steps of the adapters of ``make_policy``
FRAME = {"pi0": 48, "dm0": 64}  # env frame size of the test observations (the adapter resizes)
