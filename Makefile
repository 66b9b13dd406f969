# Add & Norm — the commands a person types.
#   make book       build the website into _build/html (executes every chapter)
#   make test       run the whole test suite (library, chapters, grading, website)
#   make test-fast  everything but the book build, nbgrader and the browser (the inner loop, < 2 min)
#   make lab        open JupyterLab on the exercises
#   make check      grade your own exercises/ with the full tests (EXERCISE=02_layer_norm for one)
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

.PHONY: book test test-fast lab exercises serve clean graphviz browser check

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

# Jupyter Book's execution cache does not notice a change in an imported module (addnorm): make drops the
# cache when a file under lib/ is newer than the last build, and always on CI, which executes every chapter afresh.
BOOK_LIB_STAMP := _build/.lib-stamp
$(BOOK_LIB_STAMP): $(shell find lib -name '*.py') $(if $(filter 1 true yes,$(CI)),FORCE)
	rm -rf _build/.jupyter_cache
	@mkdir -p _build && touch $@
FORCE:

book: $(STAMP) graphviz $(BOOK_LIB_STAMP)
	$(BIN)/python tools/build_book.py
	@echo "Open file://$(abspath _build/html/index.html)   (or: make serve)"

test: $(STAMP) graphviz browser
	$(BIN)/python -m pytest

test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow"

lab: $(STAMP)
	$(BIN)/jupyter lab --ServerApp.root_dir=$(CURDIR) --LabApp.default_url=/lab/tree/exercises --LabApp.app_settings_dir=$(CURDIR)/.jupyter/lab/settings $(if $(filter 0,$(shell id -u)),--allow-root)

# nbgrader's generate_assignment, run in a throw-away course directory (so no gradebook.db lands here); its
# release replaces exercises/. tests/test_exercises.py fails when exercises/ differs from what this makes.
exercises: $(STAMP)
	@course=$$(mktemp -d) && trap 'rm -rf "$$course"' EXIT && \
	cp nbgrader_config.py "$$course/" && cp -R solutions "$$course/solutions" && \
	(cd "$$course" && nbgrader generate_assignment "*" --force --log-level=WARN) && \
	rm -rf exercises && cp -R "$$course/exercises" exercises && echo "exercises/ regenerated from solutions/"

serve: $(STAMP)
	@test -f _build/html/index.html || $(MAKE) book
	$(BIN)/python -m http.server --bind 127.0.0.1 --directory _build/html 8000

clean:
	rm -rf _build .pytest_cache
	find . -name __pycache__ -prune -exec rm -rf {} +
	rm -rf gradebook.db submitted autograded feedback

# The learner's self-check: grades a copy of each exercises/ notebook with the full tests (hidden ones too) in a
# throw-away course directory; prints scores and failing tests, writes feedback-self/. Your notebooks are only read.
check: $(STAMP)
	$(BIN)/python tools/self_check.py $(EXERCISE)
