"""nbgrader settings every user of the course hub shares (copied into the hub environment's etc/jupyter).

Students have no course directory of their own: this names their course. The exchange is nbgrader 0.9.6's
default folder, spelled out so that the hub's set-up (hub/hubctl.py) and nbgrader agree on it.
"""

c = get_config()  # noqa: F821  (provided by traitlets when it loads this file)
c.CourseDirectory.course_id = "addnorm"
c.Exchange.root = "/usr/local/share/nbgrader/exchange"
