"""nbgrader settings for `make lab`, which puts this folder on JUPYTER_CONFIG_PATH: the exchange when there is no hub.

JupyterLab's Assignment List and the formgrader's Release and Collect buttons talk to nbgrader's exchange. Where a
shared exchange exists (nbgrader's default folder, as on a course server), they use it. Otherwise they use a
private exchange in the course folder (`.exchange/`, git-ignored, made by `make lab`): a learner on a laptop sees
an empty Assignment List instead of "The exchange directory does not exist", and an instructor can try release,
fetch, submit and collect alone. A course folder's own nbgrader_config.py or ~/.jupyter one still overrides this.
"""

import os

c = get_config()  # noqa: F821  (provided by traitlets when it loads this file)

SHARED_EXCHANGE = "/usr/local/share/nbgrader/exchange"          # nbgrader 0.9.6's default
LOCAL_EXCHANGE = os.environ.get("ADDNORM_LOCAL_EXCHANGE")        # set by `make lab`

if LOCAL_EXCHANGE and not os.path.isdir(SHARED_EXCHANGE):
    c.Exchange.root = LOCAL_EXCHANGE
