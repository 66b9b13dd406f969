# The course image: one image for the learners' servers (Zero to JupyterHub's singleuser.image), the HTTP exchange
# beside the hub, and the Dask scheduler and grading workers (hub/k8s/), so that a worker grades with the nbgrader,
# torch and sandbox the learners use.
#
#   docker build -t registry.example.org/addnorm-course:0.2.0 .        (the tag: addnorm.__version__)
#
# What was built where, and what was not: bench/README.md, "The course image" (bench/build_image.sh builds it on a
# machine that reaches no container registry).

# A Jupyter Docker Stacks image: user jovyan (uid 1000, gid 100), Python in /opt/conda owned by jovyan. 2024-03-31
# is a build with Python 3.11.8 (pyproject.toml: >=3.11,<3.12; later builds have 3.12). It must be 3.11.4 or later:
# a grading worker unpacks jobs with tarfile's extraction filters (Debian 12's 3.11.2 lacks them).
ARG BASE=quay.io/jupyter/minimal-notebook:2024-03-31
FROM ${BASE}

# Where torch comes from: PyTorch's CPU wheels (PyPI's torch wheel pulls several GB of CUDA libraries). Its version
# is not written here: it is read from pyproject.toml's pin below.
ARG TORCH_FROM="--index-url https://download.pytorch.org/whl/cpu"

USER root
# The grading sandbox (addnorm_grading.sandbox): bubblewrap, and libseccomp for its system-call filter; setpriv,
# prlimit and unshare come with util-linux.
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap libseccomp2 util-linux \
 && rm -rf /var/lib/apt/lists/*

# Only what the install needs (.dockerignore leaves everything else out: no solutions/, no checks/).
COPY --chown=1000:100 pyproject.toml README.md /tmp/addnorm-src/
COPY --chown=1000:100 lib /tmp/addnorm-src/lib

# The per-role Jupyter settings (hub/z2jh-values.yaml points JUPYTER_CONFIG_PATH at /etc/addnorm/<role>), the
# course's constants beside the settings every user shares, and nbgrader set to use the HTTP exchange
# (ADDNORM_EXCHANGE_URL, from singleuser.extraEnv; the token is the server's own JUPYTERHUB_API_TOKEN).
COPY hub/jupyter /etc/addnorm
COPY course.toml /etc/addnorm/everyone/course.toml
RUN mkdir -p /etc/jupyter \
 && printf '%s\n' \
      '# The course image (Dockerfile): the settings every user of the course shares, and the HTTP exchange.' \
      'load_subconfig("/etc/addnorm/everyone/nbgrader_config.py")' \
      'from addnorm_grading.http_exchange.client import configure' \
      'configure(get_config())' \
      > /etc/jupyter/nbgrader_config.py

USER 1000
# torch first, at pyproject.toml's pin, from TORCH_FROM; then the course (its torch pin is met already) and the hub
# extra (jupyterhub-singleuser for the learners' servers, HubAuth for the exchange).
RUN cd /tmp/addnorm-src \
 && torch="$(python -c 'import tomllib; print(next(d for d in tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"] if d.startswith("torch==")))')" \
 && pip install --no-cache-dir ${TORCH_FROM} "${torch}" \
 && pip install --no-cache-dir ".[course,hub]" \
 && cd / && rm -rf /tmp/addnorm-src

WORKDIR /home/jovyan
