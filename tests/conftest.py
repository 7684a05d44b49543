"""pytest setup for the Python tests (tools/gen_model.py, tests/reference_forward.py).

Run from the repo root:  /usr/bin/python3 -m pytest -q tests/

Environment:
  PAGELLM_BINARY      path to the built pagellm binary; tests that run it skip when unset/missing
  PAGELLM_SHARED_DIR  test assets (default ../shared next to the repo); tests skip when absent
  PAGELLM_TMP         scratch directory for generated models (default: pytest's tmp_path)
  PAGELLM_PYTHONPATH  build/python: where the built Python package `pagellm` is laid out; the
                      Python-package tests skip when unset
"""

import os
import shutil
import sys
import tempfile

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for sub in ("tools", "tests"):
    path = os.path.join(REPO_ROOT, sub)
    if path not in sys.path:
        sys.path.insert(0, path)


def shared_dir_or_none():
    path = os.environ.get("PAGELLM_SHARED_DIR") or os.path.join(os.path.dirname(REPO_ROOT), "shared")
    return path if os.path.isdir(path) else None


@pytest.fixture(scope="session")
def shared_dir():
    path = shared_dir_or_none()
    if path is None:
        pytest.skip("shared test assets not found (set PAGELLM_SHARED_DIR)")
    return path


@pytest.fixture(scope="session")
def pagellm_binary():
    path = os.environ.get("PAGELLM_BINARY")
    if not path:
        pytest.skip("PAGELLM_BINARY is not set")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        pytest.skip(f"PAGELLM_BINARY={path} is not an executable file")
    return path


@pytest.fixture(scope="session")
def scratch_dir(tmp_path_factory):
    base = os.environ.get("PAGELLM_TMP")
    if base:
        os.makedirs(base, exist_ok=True)
        return tempfile.mkdtemp(prefix="pytest-", dir=base)
    return str(tmp_path_factory.mktemp("pagellm"))


@pytest.fixture(scope="session")
def pagellm_module():
    """The built Python package (build/python/pagellm), imported."""
    path = os.environ.get("PAGELLM_PYTHONPATH")
    if not path:
        pytest.skip("PAGELLM_PYTHONPATH is not set (the Python package is not built)")
    if path not in sys.path:
        sys.path.insert(0, path)
    import pagellm

    return pagellm


@pytest.fixture(scope="session")
def stories_model(shared_dir):
    return os.path.join(shared_dir, "models", "stories260K")


@pytest.fixture(scope="session")
def node():
    """The node binary for the official `openai` npm client's checks (tests/e2e/*.test.mjs);
    skips without node or without the client (scripts/setup.sh runs npm install there)."""
    path = shutil.which("node")
    if path is None:
        pytest.skip("node is not installed")
    e2e = os.path.join(os.path.dirname(os.path.abspath(__file__)), "e2e")
    if not os.path.isfile(os.path.join(e2e, "node_modules", "openai", "package.json")):
        pytest.skip("the openai npm package is not installed (npm install in tests/e2e)")
    return path
