"""Chapter 2's warm-up and RAdam runs: writes data/warmup_runs.json.

    python tools/warmup_runs.py              the ten runs (5 settings × 2 seeds, 200 steps each; about 25 s)
    python tools/warmup_runs.py --tiny --out F
                                             a 1-layer, 6-step version (a smoke test)

Every run is seeded and trains with one thread (`addnorm.lab.warmup_runs.run`), so the file is the same each
time it is made with the same code, PyTorch and CPU; the file records the PyTorch version and the CPU.
Chapter 2 draws its warm-up and RAdam figures from the file and trains one run again to check it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

from addnorm.lab.warmup_runs import SETTINGS, TINY_SETTINGS, WARMUP_FILE, make_file

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true", help="a 1-layer, 6-step version (a smoke test)")
    parser.add_argument("--out", type=Path, default=ROOT / WARMUP_FILE, help="where to write (default: %(default)s)")
    args = parser.parse_args(argv)
    content = make_file(TINY_SETTINGS if args.tiny else SETTINGS)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    content["meta"]["git_commit"] = commit
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(content, indent=1) + "\n")
    print(f"wrote {args.out}: {len(content['results'])} runs in {content['meta']['run_time_s']:.0f} s "
          f"(torch {content['meta']['torch']}, {content['meta']['cpu']})")


if __name__ == "__main__":
    main()
