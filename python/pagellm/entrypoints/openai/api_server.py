"""`python -m pagellm.entrypoints.openai.api_server --model M [flags]`: starts the same
OpenAI-compatible server as `pagellm serve M [flags]` (vLLM's older entry point, with the
flags spelled as vLLM spells them), by running the pagellm binary in this process."""

import sys

from pagellm._binary import exec_binary


def main(argv: list = None) -> None:
    args = sys.argv[1:] if argv is None else list(argv)
    exec_binary(["serve"] + args)


if __name__ == "__main__":
    main()
