"""Finding the pagellm executable that the console script and the server entry point run."""

import os

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def find_binary() -> str:
    """$PAGELLM_BINARY, else the binary installed inside the package (pip install), else the
    one of the CMake build tree this package was laid out in (build/python/pagellm ->
    build/pagellm)."""
    candidates = [os.environ.get("PAGELLM_BINARY"),
                  os.path.join(_PACKAGE_DIR, "bin", "pagellm"),
                  os.path.join(os.path.dirname(os.path.dirname(_PACKAGE_DIR)), "pagellm")]
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise FileNotFoundError("the pagellm executable was not found: set PAGELLM_BINARY, or "
                            "install the package from a source tree that has been built")


def exec_binary(args: list) -> None:
    """Replaces this process with `pagellm ARGS...` (signals and the exit code are the
    binary's own)."""
    path = find_binary()
    os.execv(path, [path] + list(args))
