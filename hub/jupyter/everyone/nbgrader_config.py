"""nbgrader settings every user of the course hub shares (copied into the hub environment's etc/jupyter).

Students have no course folder of their own: this names their course and its exchange, read from the course's
course.toml, which hub/hubctl.py copies beside this file.
"""

import os
import tomllib
from pathlib import Path

c = get_config()  # noqa: F821  (provided by traitlets when it loads this file)
course = tomllib.loads(Path(__file__).with_name("course.toml").read_text())["course"]
c.CourseDirectory.course_id = course["id"]
c.Exchange.root = course["exchange"]

# `make hub PODS=1`: graded work over the HTTP exchange service (the hub gives each server its address), never a
# shared folder: the service knows who is asking from the server's own hub token.
if os.environ.get("ADDNORM_EXCHANGE_URL"):
    from addnorm_grading.http_exchange.client import configure

    configure(c)
