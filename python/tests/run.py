"""The `python` meson test: pytest over python/tests with the package built
in the build folder (argv[1], put first on sys.path) and the kiln tool
(argv[2], for comparing with `kiln info --json`). Exit 77 (skip) when numpy
or pytest is missing for this Python."""

import os
import sys

try:
    import numpy  # noqa: F401
    import pytest
except ImportError as e:
    print("skipping the Python tests: %s (Debian: apt-get install python3-numpy "
          "python3-pytest)" % e)
    sys.exit(77)

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.abspath(sys.argv[1]))
sys.path.insert(1, here)
os.environ["PYTHONPATH"] = os.pathsep.join(
    [os.path.abspath(sys.argv[1])] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
if len(sys.argv) > 2:
    os.environ["KILN_TOOL"] = os.path.abspath(sys.argv[2])
sys.exit(pytest.main([here, "-q", "-p", "no:cacheprovider", "-ra"] + sys.argv[3:]))
