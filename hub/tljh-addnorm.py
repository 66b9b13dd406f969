"""The Littlest JupyterHub: per-role Jupyter settings for the Add & Norm course. NOT TESTED with TLJH here.

Copy to /opt/tljh/config/jupyterhub_config.d/addnorm.py, copy hub/jupyter to /opt/tljh/addnorm, then
`sudo tljh-config reload`. The instructor's server may frame the formgrader (nbgrader #1919); students' servers
have no Formgrader, Create Assignment or course list. Same settings as the loopback hub (hub/jupyterhub_config.py).
"""

INSTRUCTORS = {"instructor"}          # JupyterHub user names (TLJH's Unix users are jupyter-<name>)


def addnorm_role_settings(spawner):
    """Point the user's server at the instructor's or the students' Jupyter settings."""
    role = "instructor" if spawner.user.name in INSTRUCTORS else "student"
    spawner.environment = {**spawner.environment, "JUPYTER_CONFIG_PATH": f"/opt/tljh/addnorm/{role}"}


c.Spawner.pre_spawn_hook = addnorm_role_settings  # noqa: F821  (`c` is JupyterHub's config)
