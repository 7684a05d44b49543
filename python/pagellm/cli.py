"""The `pagellm` console script: runs the C++ binary's command line (serve, generate, bench,
...) with the same arguments, so that `vllm serve M ...` becomes `pagellm serve M ...`."""

import sys

from pagellm._binary import exec_binary


def main() -> None:
    exec_binary(sys.argv[1:])


if __name__ == "__main__":
    main()
