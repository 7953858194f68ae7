"""The local Ray runtime that the Ray tests of one module share (``ray.init`` takes 5-6 s: once per module)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

import pytest


def ray_runtime_fixture(num_cpus: int = 4, by_value: str | None = None) -> Callable:
    """A module-scoped ``ray_runtime`` fixture: a local runtime of ``num_cpus`` logical CPUs, auth off. ``by_value``:
    a test module whose classes (stage subclasses) travel to the workers by value, as they cannot import it."""

    @pytest.fixture(scope="module")
    def ray_runtime():  # noqa: ANN202 - a generator fixture
        import ray
        import ray.cloudpickle

        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        if by_value:
            ray.cloudpickle.register_pickle_by_value(sys.modules[by_value])
        ray.init(num_cpus=num_cpus, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False)
        yield
        ray.shutdown()

    return ray_runtime
