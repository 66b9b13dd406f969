# Add & Norm — the commands a person types.
#   make book       build the website into _build/html (executes every chapter)
#   make test       run the whole test suite (library, chapters, grading, website)
#   make test-fast  everything but the book build, nbgrader and the browser (the inner loop, < 2 min)
#   make lab        open JupyterLab on the exercises
#   make secret     the course's secret for hidden inputs, checks/secret (once per course folder; never committed)
#   make check      grade your own exercises/ with the full tests (EXERCISE=02_layer_norm for one)
#   make capstone   your components of exercises 1-5 checked, assembled, trained and blamed (NOTEBOOKS=DIR)
#   make translations  after editing a page and `make book`: merge its changed messages into locales/zh_Hans
#                   (new ones empty, changed ones fuzzy) and list what still needs translating
#   make exercises  regenerate exercises/ from solutions/ with nbgrader
#   make serve      serve the built site on http://127.0.0.1:8000
#   make clean      remove build outputs
#   make hub        start a course JupyterHub on 127.0.0.1 with an instructor and three students (root;
#                   STUDENTS=N for student1..studentN; each user's password in /opt/addnorm-hub/state/passwords)
#                   PODS=1: no Unix user per person, every server as one user in namespaces of its own, hub
#                   accounts and the HTTP exchange, as on Kubernetes; WORKERS=N: grade on N Dask workers
#   make hub-enroll CLASS=students.csv   add a class list (nbgrader's students.csv format) to the running hub
#   make hub-down   stop it and remove its users
# Every target creates .venv on first use, and re-installs when pyproject.toml changes.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# nbgrader shells out to `alembic`, and the book build to `jupyter`: both live in .venv/bin.
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: secret translations book test test-fast lab exercises serve clean graphviz postgres browser sweep budget warmup-runs modern-runs hub hub-down sandbox grade check capstone hub-enroll

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[course,load,cluster]"
	touch $(STAMP)

# Debian packages the build and the tests use; installed when missing (apt-get needs root:
# on your own machine, `sudo apt-get install graphviz chromium` once instead).
APT_INSTALL = apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq

# The diagrams are drawn by Graphviz's `dot` when the book is built.
graphviz:
	@command -v dot >/dev/null || { $(APT_INSTALL) graphviz >/dev/null; }

# The gradebook can live in PostgreSQL when grading leaves one machine (addnorm_grading.postgres): Debian's server.
postgres:
	@ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || { $(APT_INSTALL) postgresql >/dev/null; }

# The website tests drive Debian's Chromium (a test tool's own browser download does not work offline);
# the CJK font lets the glossary's Chinese terms render in its screenshots.
browser:
	@test -x /usr/bin/chromium || { $(APT_INSTALL) chromium >/dev/null; }
	@test -d /usr/share/fonts/opentype/noto || { $(APT_INSTALL) fonts-noto-cjk >/dev/null; }

# Neither Jupyter Book's execution cache nor Sphinx (in any of the three editions) notices a change in an imported module (addnorm): when a file
# under lib/addnorm is newer than the last build (and always on CI), make drops the cache and Sphinx's record of
# what it built (_build/.doctrees), so every chapter, each of which imports addnorm, executes and is written again.
BOOK_LIB_STAMP := _build/.lib-stamp
$(BOOK_LIB_STAMP): $(shell find lib/addnorm -name '*.py') $(if $(filter 1 true yes,$(CI)),FORCE)
	rm -rf _build/.jupyter_cache _build/.doctrees _build/editions
	@mkdir -p _build && touch $@
FORCE:

book: $(STAMP) graphviz $(BOOK_LIB_STAMP)
	$(BIN)/python tools/build_book.py
	@echo "Open file://$(abspath _build/html/index.html)   (or: make serve)"

translations: $(STAMP)
	$(BIN)/python tools/translations.py update

test: $(STAMP) graphviz postgres browser sandbox
	$(BIN)/python -m pytest

test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow"

# Without a course hub, the Assignment List uses a private exchange in .exchange/ (see hub/solo/nbgrader_config.py).
lab: export JUPYTER_CONFIG_PATH := $(CURDIR)/hub/solo$(if $(JUPYTER_CONFIG_PATH),:$(JUPYTER_CONFIG_PATH))
lab: export ADDNORM_LOCAL_EXCHANGE := $(CURDIR)/.exchange
lab: $(STAMP)
	@mkdir -p .exchange
	$(BIN)/jupyter lab --ServerApp.root_dir=$(CURDIR) --LabApp.default_url=/lab/tree/exercises --LabApp.app_settings_dir=$(CURDIR)/.jupyter/lab/settings $(if $(filter 0,$(shell id -u)),--allow-root)

# The shared test helpers are written into solutions/ and checks/ from their one source
# (lib/addnorm_grading/helper_source.py); then nbgrader's generate_assignment, run in a throw-away course directory
# (so no gradebook.db lands here); its release replaces exercises/. tests/test_exercises.py fails when exercises/
# differs from what this makes.
exercises: $(STAMP)
	@$(BIN)/python -m addnorm_grading.helpers solutions checks
	@course=$$(mktemp -d) && trap 'rm -rf "$$course"' EXIT && \
	cp nbgrader_config.py course.toml "$$course/" && cp -R solutions "$$course/solutions" && \
	(cd "$$course" && nbgrader generate_assignment "*" --force --log-level=WARN) && \
	rm -rf exercises && cp -R "$$course/exercises" exercises && echo "exercises/ regenerated from solutions/"

# The capstone (addnorm_grading.capstone): reads NOTEBOOKS/<assignment>/<notebook>.ipynb, never changes them;
# the report and the loss curves go to _build/capstone/.
NOTEBOOKS ?= exercises
capstone: $(STAMP)
	$(BIN)/python -m addnorm_grading.capstone --notebooks $(NOTEBOOKS) --out _build/capstone

serve: $(STAMP)
	@test -f _build/html/index.html || $(MAKE) book
	$(BIN)/python -m http.server --bind 127.0.0.1 --directory _build/html 8000

clean:
	rm -rf _build .pytest_cache
	find . -name __pycache__ -prune -exec rm -rf {} +
	rm -rf gradebook.db submitted autograded feedback

# The depth × learning-rate sweep of chapters 1 and 2 (about an hour on 2 cores, resumable): writes
# data/depth_lr_sweep.json, which the chapters read. One cell: python tools/sweep.py --only pre_ln --depth 6 --lr 3e-3 --seed 0
sweep: $(STAMP)
	$(BIN)/python tools/sweep.py

# The budget study of chapter 2 (about an hour on 2 cores, resumable): the cells that fail the 300-step map,
# trained 3,000 steps and measured at 300, 1,000 and 3,000; writes data/postln_budget.json.
budget: $(STAMP)
	$(BIN)/python tools/sweep.py --budget

# Chapter 2's warm-up and RAdam runs (seconds): writes data/warmup_runs.json, which the chapter draws from and
# checks one run of again.
warmup-runs: $(STAMP)
	$(BIN)/python tools/warmup_runs.py

# Chapter 7's runs of the 2017 block, the modern block and the 2017 block + RoPE (a few minutes on 2 cores):
# writes data/modern_block_runs.json, which the chapter draws from and checks one slice of again.
modern-runs: $(STAMP)
	$(BIN)/python tools/modern_block_runs.py

# The course JupyterHub (needs root: it creates Unix users). hub/hubctl.py builds its shared environment in
# /opt/addnorm-hub (from Debian's python3.11, with configurable-http-proxy from npm), then starts it; see hub/.
hub: sandbox
	@command -v npm >/dev/null || { $(APT_INSTALL) npm >/dev/null; }
	@/usr/bin/python3 hub/hubctl.py up $(if $(STUDENTS),--students $(STUDENTS)) $(if $(filter 1 true yes,$(PODS)),--pods) $(if $(WORKERS),--workers $(WORKERS))

# A class list in nbgrader's students.csv format (id,first_name,last_name,email) into the running hub: a Unix user
# and a password for each id, and nbgrader's student table.
hub-enroll:
	@/usr/bin/python3 hub/hubctl.py enroll $(CLASS)

hub-down:
	@/usr/bin/python3 hub/hubctl.py down

# Autograding runs each submission's kernel in a sandbox (addnorm_grading.sandbox, see guide/instructors.md):
# bubblewrap from Debian and, when grading as root, an unprivileged system user for the kernels (course.toml's
# [sandbox] user; autograde also makes it at first use).
course_value = $(shell $(PYTHON) -c "import tomllib; print(tomllib.load(open('course.toml', 'rb'))$(1))")
GRADER_USER = $(call course_value,['sandbox']['user'])
sandbox:
	@command -v bwrap >/dev/null || { $(APT_INSTALL) bubblewrap >/dev/null; }
	@ldconfig -p | grep -q libseccomp.so.2 || { $(APT_INSTALL) libseccomp2 >/dev/null; }
	@if [ "$$(id -u)" = 0 ] && ! id -u $(GRADER_USER) >/dev/null 2>&1; then \
	  useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin $(GRADER_USER); fi

# The hidden checks' inputs come from the course's secret (addnorm_grading.secret): made once, kept if there.
secret: $(STAMP)
	@$(BIN)/python -m addnorm_grading.secret

# Autograde every student's submission of ASSIGNMENT (default: every assignment): nbgrader processes over
# batches of students, one per core and one more (addnorm_grading.grade_class).
grade: $(STAMP) sandbox secret
	$(BIN)/python -m addnorm_grading.grade_class "$(or $(ASSIGNMENT),*)"

# The learner's self-check: grades a copy of each exercises/ notebook with the full tests (hidden ones too) in a
# throw-away course directory; prints scores and failing tests, writes feedback-self/. Your notebooks are only read.
check: $(STAMP)
	$(BIN)/python -m addnorm_grading.self_check $(EXERCISE)
