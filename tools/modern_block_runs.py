"""Chapter 7's runs: writes data/modern_block_runs.json.

    python tools/modern_block_runs.py                  every run (3 models × 2 tasks × 4 seeds; 1.5-3 min on 2 cores)
    python tools/modern_block_runs.py --settings '{"max_steps": 6}' --out F     (tests: some settings changed)

Every run seeds itself and trains on one thread (`addnorm.lab.modern_runs.run`), so neither the order nor the number
of workers changes a result; the file records the PyTorch version and the CPU. Chapter 7 draws its training figure
and verdicts from the file and trains one slice again to check it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from pathlib import Path

os.environ.setdefault("TQDM_DISABLE", "1")            # no progress bars in the log
from addnorm.lab.modern_runs import RUNS_FILE, SETTINGS  # noqa: E402
from addnorm.lab.modern_runs_file import make_file  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / RUNS_FILE, help="where to write (default: %(default)s)")
    parser.add_argument("--workers", type=int, default=2, help="processes side by side (default: %(default)s)")
    parser.add_argument("--settings", type=json.loads, default={}, help="JSON overriding some of the settings")
    args = parser.parse_args(argv)
    content = make_file({**SETTINGS, **args.settings}, args.workers)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    content["meta"]["git_commit"] = commit
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(content, indent=1) + "\n")
    print(f"wrote {args.out}: {len(content['runs'])} runs in {content['meta']['run_time_s']:.0f} s "
          f"(torch {content['meta']['torch']}, {content['meta']['cpu']})")


if __name__ == "__main__":
    main()
