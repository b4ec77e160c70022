"""Fixtures of the kiln Python tests: one kiln.Device per device that
KILN_TEST_DEVICE (a selector, default 'all') takes; no device is a skip,
or a failure under KILN_REQUIRE_DEVICE=1, as in the C suite."""

import os

import numpy as np
import pytest

import kiln


def _selectors():
    sel = os.environ.get("KILN_TEST_DEVICE", "all")
    try:
        return [d["selector"] for d in kiln.devices(sel)]
    except kiln.Error:
        return []


SELECTORS = _selectors()


@pytest.fixture(scope="session", params=SELECTORS or [None],
                ids=lambda s: s or "no-device")
def dev(request):
    if request.param is None:
        if os.environ.get("KILN_REQUIRE_DEVICE") == "1":
            pytest.fail("no OpenCL device (KILN_REQUIRE_DEVICE=1)")
        pytest.skip("no OpenCL device")
    d = kiln.Device(request.param)
    yield d
    d.close()


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
