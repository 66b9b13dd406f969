"""JupyterHub for the Add & Norm course on 127.0.0.1 (started by `make hub`): real Unix users, or (`make hub PODS=1`,
ADDNORM_HUB_MODE=pods) one Unix user for every server, as on Zero to JupyterHub.

hub/hubctl.py creates the users (each with a password of its own, in the Unix group ADDNORM_HUB_GROUP), the shared
environment and the course, then starts JupyterHub with this file and these variables: ADDNORM_HUB_HOME (its
folder), ADDNORM_HUB_PORT, ADDNORM_HUB_INSTRUCTOR, ADDNORM_HUB_GROUP and ADDNORM_HUB_COURSE (the instructor's course folder). Users log in with their Unix password
(PAMAuthenticator); a student enrolled later (`make hub-enroll`) joins the group and can log in without a restart.
Each user's server runs as that Unix user from the shared environment (LocalProcessSpawner); the instructor's and
the students' servers read different Jupyter settings (hub/jupyter/).

With ADDNORM_HUB_MODE=pods nobody has a Unix user of their own: every server runs as ADDNORM_HUB_POD_USER, each in
PID and mount namespaces of its own with only its own folder of ADDNORM_HUB_HOMES (addnorm_grading.hub_spawner);
users log in with a hub account (addnorm_grading.hub_accounts); graded work travels over the HTTP exchange service,
which knows the caller from the hub's token (addnorm_grading.http_exchange). See the end of this file.
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

pods = os.environ.get("ADDNORM_HUB_MODE") == "pods"
workers = os.environ.get("ADDNORM_HUB_WORKERS")   # `make hub WORKERS=N`: grading on N Dask workers (the end)
scheduler = f"tls://127.0.0.1:{port + 4}"
grading_engine = ([] if not workers else
                  ["--FeedbackService.engine=dask", f"--FeedbackService.scheduler={scheduler}"])

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
# when it exits. Its ledger and PID file: <course>/feedback-service/. With WORKERS=N it grades on a Dask scheduler
# and N workers of its own (mutual TLS, its certificates in <course>/feedback-service/tls: no learner can reach them).
c.JupyterHub.services = [{
    "name": "feedback",
    "user": instructor,
    "command": [f"{venv_bin}/python", "-m", "addnorm_grading.feedback_service", f"--course={course}",
                *grading_engine],
    "cwd": course,
    "environment": {"PATH": f"{venv_bin}:/usr/bin:/bin", "LANG": "C.UTF-8"},
}]


# --- PODS=1: one Unix user for every server, hub accounts, the HTTP exchange ------------------------------------
if pods:
    pod_user = os.environ["ADDNORM_HUB_POD_USER"]
    homes = os.environ["ADDNORM_HUB_HOMES"]                # <homes>/<hub name>: each user's folder
    store = os.environ["ADDNORM_HUB_STORE"]                # the exchange's submissions, releases and feedback
    gradebook = os.environ["ADDNORM_HUB_GRADEBOOK"]        # the PostgreSQL cluster (its password file)
    exchange_url = f"http://127.0.0.1:{port}/services/exchange/"
    service_env = {"PATH": f"{venv_bin}:/usr/bin:/bin", "LANG": "C.UTF-8"}

    c.JupyterHub.authenticator_class = "addnorm_grading.hub_accounts.CourseAccounts"
    c.CourseAccounts.accounts_file = f"{state}/passwords"
    c.JupyterHub.load_groups = {"instructors": {"users": [instructor]}}     # course.toml's [exchange] instructors

    c.JupyterHub.spawner_class = "addnorm_grading.hub_spawner.SharedUserSpawner"
    c.SharedUserSpawner.shared_user = pod_user
    c.SharedUserSpawner.homes = homes
    c.SharedUserSpawner.mem_limit = "2G"
    c.Spawner.environment = {**c.Spawner.environment, "ADDNORM_EXCHANGE_URL": exchange_url}

    def pod_settings(spawner):
        """The role's Jupyter settings, and what its server may read besides the operating system: the shared
        environment and its settings, and for the instructor the gradebook's cluster (their nbgrader reads its
        password). Nothing else of this machine: not the hub's state, the exchange's store, the course's
        repository (its solutions/ and checks/) or anybody's folder."""
        role_settings(spawner)
        spawner.visible = [f"{home}/venv", f"{home}/etc"] + ([gradebook] if spawner.user.name == instructor else [])

    c.Spawner.pre_spawn_hook = pod_settings

    # The exchange (its API needs a hub token; who is asking comes from it) and the feedback service, which grades
    # what the exchange received as the learner the token named, at the exchange's receipt time. Both run as the
    # pod user outside every server's namespaces, as a service's pod would: no server sees their processes or files.
    c.JupyterHub.services = [
        {"name": "exchange", "url": f"http://127.0.0.1:{port + 3}", "user": pod_user, "cwd": store,
         "command": [f"{venv_bin}/python", "-m", "addnorm_grading.http_exchange", "--store", store,
                     "--course-file", f"{course}/course.toml"],
         "environment": service_env},
        {"name": "feedback", "user": pod_user, "cwd": course,
         "command": [f"{venv_bin}/python", "-m", "addnorm_grading.feedback_service", f"--course={course}",
                     f"--FeedbackService.exchange={store}", "--FeedbackService.identity=exchange", *grading_engine],
         "environment": {**service_env, "JUPYTER_CONFIG_DIR": f"{homes}/{instructor}/.jupyter"}},  # the gradebook
    ]
    c.JupyterHub.load_roles = [
        {"name": "user", "scopes": ["self", "access:services!service=exchange"]},
        {"name": "server", "scopes": ["users:activity!user", "access:servers!server",
                                      "access:services!service=exchange", "read:users:groups!user"]},
    ]


# --- WORKERS=N: grading on a Dask scheduler and N workers, two more managed services ------------------------------
# Both run as root, as `make grade` does: a grader that is root forks each sandboxed kernel from a process that has
# imported torch (addnorm_grading.zygote) and runs learner code as course.toml's kernel user; a grader that is the
# instructor or the pod user starts a fresh interpreter for each kernel, at about two thirds of the rate. The scheduler, the
# workers and the feedback service require the course's certificate of each other (hub/hubctl.py makes it in the
# service's state folder, which no learner's server sees), so no learner reaches the engine. The workers get
# each submission and the course's files from the job, never from the course folder (feedback_service.remote). The
# hub restarts either when it exits, and stops both with itself. Neither serves a web page (remote.NO_PAGES: Dask's
# own would show every learner on the machine the workers, their logs and the exceptions of failed jobs).
if workers:
    from addnorm_grading.feedback_service import remote     # the hub's environment has the course's library

    from pathlib import Path

    tls = remote.certificate_files(Path(course) / "feedback-service" / "tls")    # made by hub/hubctl.py
    # The workers' temporary folders (each job's copy of the course's checks and secret, a submission, Dask's own
    # scratch) are in the hub's state, root's alone: a worker killed mid-job leaves them there, and `make hub-down`
    # removes them with the state (in /tmp they outlived the hub).
    scratch = Path(state) / "grading-scratch"
    scratch.mkdir(mode=0o700, exist_ok=True)
    engine_env = {"PATH": f"{venv_bin}:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/root", "TMPDIR": str(scratch),
                  **remote.NO_PAGES}
    with_the_hub = ["setpriv", "--pdeathsig=KILL", "--"]    # killed with the hub, should it die without stopping them
    c.JupyterHub.services += [
        {"name": "grading-scheduler", "cwd": "/", "environment": engine_env,
         "command": with_the_hub + remote.scheduler_command(f"{venv_bin}/dask", "127.0.0.1", port + 4, tls)},
        {"name": "grading-workers", "cwd": "/", "environment": engine_env,
         "command": with_the_hub + remote.worker_command(f"{venv_bin}/dask", scheduler, int(workers), tls)},
    ]
