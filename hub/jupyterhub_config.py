"""JupyterHub for the Add & Norm course on 127.0.0.1, with real Unix users (started by `make hub`).

hub/hubctl.py creates the users (each with a password of its own, in the Unix group ADDNORM_HUB_GROUP), the shared
environment and the course, then starts JupyterHub with this file and these variables: ADDNORM_HUB_HOME (its
folder), ADDNORM_HUB_PORT, ADDNORM_HUB_INSTRUCTOR, ADDNORM_HUB_GROUP and ADDNORM_HUB_COURSE (the instructor's course folder). Users log in with their Unix password
(PAMAuthenticator); a student enrolled later (`make hub-enroll`) joins the group and can log in without a restart.
Each user's server runs as that Unix user from the shared environment (LocalProcessSpawner); the instructor's and
the students' servers read different Jupyter settings (hub/jupyter/).
"""

import os

c = get_config()  # noqa: F821  (provided by traitlets when it loads this file)

home = os.environ["ADDNORM_HUB_HOME"]
port = int(os.environ["ADDNORM_HUB_PORT"])
instructor = os.environ["ADDNORM_HUB_INSTRUCTOR"]
group = os.environ["ADDNORM_HUB_GROUP"]
course = os.environ["ADDNORM_HUB_COURSE"]
venv_bin = f"{home}/venv/bin"
state = f"{home}/state"

# --- the hub, its proxy and its database: loopback only, state in one root-only folder -------------------------
c.JupyterHub.bind_url = f"http://127.0.0.1:{port}"
c.JupyterHub.hub_bind_url = f"http://127.0.0.1:{port + 2}"
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{port + 1}"
c.ConfigurableHTTPProxy.command = [f"{home}/node/node_modules/.bin/configurable-http-proxy"]
c.ConfigurableHTTPProxy.pid_file = f"{state}/jupyterhub-proxy.pid"
c.JupyterHub.db_url = f"sqlite:///{state}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = f"{state}/jupyterhub_cookie_secret"
c.JupyterHub.cleanup_servers = True                # stopping the hub stops every user's server

# --- who may log in: the course's users, each with their own Unix password (PAM) --------------------------------
c.JupyterHub.authenticator_class = "pam"
c.PAMAuthenticator.allowed_groups = {group}         # every user `make hub` or `make hub-enroll` made, and no one else
c.PAMAuthenticator.open_sessions = False            # no PAM session (pam_systemd, lastlog): there is no login shell

# --- each user's JupyterLab: their own Unix user, the shared environment, their home folder ---------------------
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = [f"{venv_bin}/jupyterhub-singleuser"]
c.Spawner.default_url = "/lab"
c.Spawner.notebook_dir = "~"
c.Spawner.start_timeout = 120                      # a cold start on a busy 2-core machine takes 10-20 s
c.Spawner.http_timeout = 120
c.Spawner.environment = {"PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin"}


def role_settings(spawner):
    """Give the instructor's server the instructor's Jupyter settings, and a student's server the students'.

    instructor: the formgrader may be framed by JupyterLab (nbgrader #1919: a blank panel otherwise).
    student: no Formgrader, Create Assignment or course list, in the menu or on the server.
    """
    role = "instructor" if spawner.user.name == instructor else "student"
    spawner.environment = {**spawner.environment, "JUPYTER_CONFIG_PATH": f"{home}/etc/{role}"}


c.Spawner.pre_spawn_hook = role_settings


# --- feedback on submit: a managed service (no URL, so no API anyone can call), run as the instructor -----------
# It grades each new submission and releases its feedback (addnorm_grading.feedback_service); the hub restarts it
# when it exits. Its ledger and PID file: <course>/feedback-service/.
c.JupyterHub.services = [{
    "name": "feedback",
    "user": instructor,
    "command": [f"{venv_bin}/python", "-m", "addnorm_grading.feedback_service", f"--course={course}"],
    "cwd": course,
    "environment": {"PATH": f"{venv_bin}:/usr/bin:/bin", "LANG": "C.UTF-8"},
}]
