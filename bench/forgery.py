"""Every cheat on every judged exercise: tests/test_forgery.py without its test budget, timed.

`make test` grades each generic cheat (tests/cheats.py CHEATS) on one judged exercise, in turn; this grades every
cheat on every judged exercise (ADDNORM_CHEATS=all), as the issue's guarantee reads, and prints how long it took.

    .venv/bin/python bench/forgery.py                 # every exercise
    .venv/bin/python bench/forgery.py -k 02_layer_norm
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(pytest_args: list[str]) -> int:
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             str(ROOT / "tests" / "test_forgery.py"), *pytest_args],
                            cwd=ROOT, env={**os.environ, "ADDNORM_CHEATS": "all"})
    print(f"forgery, every cheat on every judged exercise: {time.perf_counter() - started:.0f} s, "
          f"pytest exit {result.returncode}")
    return result.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
