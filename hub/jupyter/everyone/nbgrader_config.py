"""nbgrader settings every user of the course hub shares (copied into the hub environment's etc/jupyter).

Students have no course folder of their own: this names their course and its exchange, read from the course's
course.toml, which hub/hubctl.py copies beside this file.
"""

import tomllib
from pathlib import Path

c = get_config()  # noqa: F821  (provided by traitlets when it loads this file)
course = tomllib.loads(Path(__file__).with_name("course.toml").read_text())["course"]
c.CourseDirectory.course_id = course["id"]
c.Exchange.root = course["exchange"]
