"""nbgrader settings for `make lab`, which puts this folder on JUPYTER_CONFIG_PATH: the exchange when there is no hub.

JupyterLab's Assignment List and the formgrader's Release and Collect buttons talk to nbgrader's exchange. Where a
shared exchange exists (nbgrader's default folder, as on a course server), they use it. Otherwise they use a
private exchange in the course folder (`.exchange/`, git-ignored, made by `make lab`): a learner on a laptop sees
an empty Assignment List instead of "The exchange directory does not exist", and an instructor can try release,
fetch, submit and collect alone. A course folder's own nbgrader_config.py or ~/.jupyter one still overrides this.
"""

import os
import tomllib
from pathlib import Path

c = get_config()  # noqa: F821  (provided by traitlets when it loads this file)

COURSE_FILE = Path(__file__).resolve().parents[2] / "course.toml"        # the course's constants
SHARED_EXCHANGE = tomllib.loads(COURSE_FILE.read_text())["course"]["exchange"]
LOCAL_EXCHANGE = os.environ.get("ADDNORM_LOCAL_EXCHANGE")        # set by `make lab`

if LOCAL_EXCHANGE and not os.path.isdir(SHARED_EXCHANGE):
    c.Exchange.root = LOCAL_EXCHANGE
