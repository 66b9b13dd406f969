"""python -m addnorm_grading.capstone --notebooks DIR [--out OUT] [--budget full|quick]

Reads DIR/<assignment>/<notebook>.ipynb for exercises 1–5 (only reads them), runs their solution cells in a fresh
kernel, and prints one line per component, the training of your model beside the reference, and last:
    capstone: exact match X% (reference Y%); blame: <component>[, <component>] | none
It writes the same report to OUT/capstone_report.txt and the loss curves to OUT/capstone_losses.png. Exit status 0
when it ran, whatever it found.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from addnorm_grading.capstone.kernel import KernelFailed, run_workbench
from addnorm_grading.capstone.notebooks import read_learner_code
from addnorm_grading.capstone.report import draw, report
from addnorm_grading.capstone.training import BUDGETS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m addnorm_grading.capstone", description=__doc__.split("\n\n")[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--notebooks", type=Path, default=Path("."), help="the folder of <assignment>/ folders (.)")
    parser.add_argument("--out", type=Path, default=Path("capstone_report"), help="where the report and figure go")
    parser.add_argument("--budget", choices=sorted(BUDGETS), default="full",
                        help="full (about a minute) or quick (the tests' reduced budget)")
    args = parser.parse_args(argv)
    try:
        code = read_learner_code(args.notebooks)
    except FileNotFoundError as error:
        print(f"capstone: {error}", file=sys.stderr)
        return 2
    try:
        result = run_workbench({"code": code, "budget": args.budget})
    except KernelFailed as error:
        print(f"capstone: could not run your code: {error}", file=sys.stderr)
        return 1
    figure = draw(result, args.out / "capstone_losses.png")
    text = report(result, args.notebooks, figure, args.budget)
    (args.out / "capstone_report.txt").write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
