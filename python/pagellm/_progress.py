"""vLLM's generate() progress bar ("Processed prompts: ... est. speed input: ... toks/s,
output: ... toks/s") through tqdm, shown when tqdm is installed and stdout is a terminal."""

import sys
from typing import Optional


class ProgressBar:
    """Counts finished prompts and their tokens; a no-op when there is nothing to show."""

    def __init__(self, total: int, enabled: bool):
        self._bar = None
        if not enabled or not sys.stdout.isatty():
            return
        try:
            from tqdm import tqdm
        except ImportError:
            return
        self._bar = tqdm(total=total, desc="Processed prompts", dynamic_ncols=True,
                         postfix="est. speed input: 0.00 toks/s, output: 0.00 toks/s")

    @property
    def active(self) -> bool:
        return self._bar is not None

    def update(self, prompts_finished: int, prompt_tokens: int, output_tokens: int) -> None:
        bar = self._bar
        elapsed = bar.format_dict["elapsed"] or 1e-9
        bar.postfix = (f"est. speed input: {prompt_tokens / elapsed:.2f} toks/s, "
                       f"output: {output_tokens / elapsed:.2f} toks/s")
        bar.update(prompts_finished - bar.n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()

    def callback(self) -> Optional[object]:
        return self.update if self._bar is not None else None
