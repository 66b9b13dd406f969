# Add & Norm — the commands a person types.
#   make book       build the website into _build/html (executes every chapter)
#   make test       run the whole test suite (library, chapters, grading, website)
#   make lab        open JupyterLab on the exercises
#   make exercises  regenerate exercises/ from solutions/ with nbgrader
#   make serve      serve the built site on http://127.0.0.1:8000
#   make clean      remove build outputs
# Every target creates .venv on first use, and re-installs when pyproject.toml changes.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# nbgrader shells out to `alembic`, and the book build to `jupyter`: both live in .venv/bin.
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: book test lab exercises serve clean graphviz browser sandbox grade

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[course]"
	touch $(STAMP)

# Debian packages the build and the tests use; installed when missing (apt-get needs root:
# on your own machine, `sudo apt-get install graphviz chromium` once instead).
APT_INSTALL = apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq

# The diagrams are drawn by Graphviz's `dot` when the book is built.
graphviz:
	@command -v dot >/dev/null || $(APT_INSTALL) graphviz >/dev/null

# The website tests drive Debian's Chromium (a test tool's own browser download does not work offline);
# the CJK font lets the glossary's Chinese terms render in its screenshots.
browser:
	@test -x /usr/bin/chromium || $(APT_INSTALL) chromium >/dev/null
	@test -d /usr/share/fonts/opentype/noto || $(APT_INSTALL) fonts-noto-cjk >/dev/null

book: $(STAMP) graphviz
	$(BIN)/python tools/build_book.py
	@echo "Open file://$(abspath _build/html/index.html)   (or: make serve)"

test: $(STAMP) graphviz browser sandbox
	$(BIN)/python -m pytest

lab: $(STAMP)
	$(BIN)/jupyter lab --ServerApp.root_dir=$(CURDIR) --ServerApp.default_url=/lab/tree/exercises $(if $(filter 0,$(shell id -u)),--allow-root)

exercises: $(STAMP)
	$(BIN)/python tools/generate_exercises.py

serve: $(STAMP)
	@test -f _build/html/index.html || $(MAKE) book
	$(BIN)/python -m http.server --bind 127.0.0.1 --directory _build/html 8000

clean:
	rm -rf _build .pytest_cache
	find . -name __pycache__ -prune -exec rm -rf {} +
	rm -rf gradebook.db submitted autograded feedback

# Autograding runs each submission's kernel in a sandbox (tools/sandbox/, see guide/instructors.md): bubblewrap
# from Debian and, when grading as root, an unprivileged system user for the kernels (also made at first use).
GRADER_USER := addnorm-grader
sandbox:
	@command -v bwrap >/dev/null || { $(APT_INSTALL) bubblewrap >/dev/null; }
	@if [ "$$(id -u)" = 0 ] && ! id -u $(GRADER_USER) >/dev/null 2>&1; then \
	  useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin $(GRADER_USER); fi

# Autograde every student's submission of ASSIGNMENT (default: every assignment), one nbgrader process per core.
grade: $(STAMP) sandbox
	$(BIN)/python tools/grade_class.py "$(or $(ASSIGNMENT),*)"
