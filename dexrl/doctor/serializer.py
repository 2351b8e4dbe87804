"""Check ``stack.serializer``: numpy works with everything a run passes arrays through.

Design notes: docs/design/doctor.md.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any

from dexrl.doctor import CheckResult, fail, ok
from dexrl.errors import one_line
from dexrl.subproc import ProbeError, run_probe

# Compiled modules built against numpy's C API that a run imports (pyarrow through Ray's
# serializer, numba through robosuite, cv2 and mujoco through LIBERO).
COMPILED = ("pyarrow", "torch", "scipy", "numba", "cv2", "mujoco", "h5py")
RAY = "ray round trip"
TORCH = "torch <-> numpy"
FIX = ("make numpy and the module named agree: under numpy 1.x keep pyarrow<26 "
       "(`pip install 'pyarrow<26'`); otherwise reinstall that module for this numpy "
       "(`pip install --force-reinstall <module>`), or rebuild the environment with `make install`")


@dataclass(frozen=True)
class SerializerFacts:
    """What the probe saw.

    Attributes:
        numpy: numpy's version in the probe's interpreter (``None``: the probe gave no answer).
        errors: What failed -> its one-line error: a module of :data:`COMPILED`, :data:`TORCH`,
            :data:`RAY`, or ``probe`` when the child itself died or timed out.
    """

    numpy: str | None
    errors: dict[str, str] = field(default_factory=dict)


def _echo(value: Any) -> Any:
    return value


def _ray_roundtrip(payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` after ``ray.put``/``ray.get`` and a remote task, on a private Ray instance."""
    import ray

    ray.init(address="local", num_cpus=1, include_dashboard=False, logging_level=logging.ERROR,
             log_to_driver=False, namespace="dexrl-doctor")
    try:
        stored = ray.get(ray.put(payload))
        return ray.get(ray.remote(max_retries=0)(_echo).remote(stored), timeout=120)
    finally:
        ray.shutdown()


def roundtrip() -> dict[str, Any]:
    """Child side: every failure, by what failed; an empty ``errors`` means all worked."""
    import numpy as np

    errors: dict[str, str] = {}
    for name in COMPILED:
        try:
            import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:  # a module it needs is missing (numpy._core under numpy 1.x)
                errors[name] = one_line(exc)
        except Exception as exc:  # e.g. "Numba needs NumPy 2.5 or less", a numpy ABI mismatch
            errors[name] = one_line(exc)
    try:
        import torch

        array = np.arange(12, dtype=np.float32).reshape(3, 4)
        if not np.array_equal(torch.from_numpy(array).numpy(), array):
            raise ValueError("values changed")
        payload = {"array": array, "tensor": torch.arange(6.0).reshape(2, 3),
                   "large": np.ones(200_000)}  # large enough for Ray's shared-memory store
    except Exception as exc:
        errors[TORCH] = one_line(exc)
        return {"numpy": np.__version__, "errors": errors}
    try:
        back = _ray_roundtrip(payload)
        same = (np.array_equal(back["array"], payload["array"])
                and torch.equal(back["tensor"], payload["tensor"])
                and np.array_equal(back["large"], payload["large"]))
        if not same:
            raise ValueError("values changed on the way")
    except Exception as exc:
        errors[RAY] = one_line(exc)
    return {"numpy": np.__version__, "errors": errors}


def probe_serializer(timeout: float) -> SerializerFacts:
    """Run :func:`roundtrip` in a child interpreter (imports and a Ray start can hang or crash)."""
    try:
        found = run_probe(roundtrip, timeout=timeout)
    except ProbeError as exc:
        return SerializerFacts(None, {"probe": str(exc)})
    return SerializerFacts(found["numpy"], dict(found["errors"]))


def check_serializer(facts: SerializerFacts) -> CheckResult:
    """Fail on anything that broke; the declared version ranges play no part here."""
    details = {"numpy": facts.numpy, "errors": facts.errors}
    if facts.errors:
        what = "; ".join(f"{name}: {error}" for name, error in facts.errors.items())
        return fail("stack.serializer", f"numpy {facts.numpy or '(unknown)'}: {what}", FIX,
                    **details)
    return ok("stack.serializer",
              f"numpy {facts.numpy}: the compiled modules import, torch converts, and a numpy "
              "array and a torch tensor survive a Ray round trip", **details)
