"""Sphinx hooks that keep the Add & Norm site offline and give every chapter a notebook download.

- Each executed chapter's notebook (with its outputs) is copied to ``_sources/<page>.ipynb`` and offered by the
  theme's download button. sphinx-book-theme does this only when a Binder/JupyterHub/Colab launch button is
  configured, and those all need the network.
- sphinx-thebe (loaded by Jupyter Book whether or not Thebe is used) puts a CDN address (unpkg.com) into every
  page; with Thebe switched off nothing uses it, so its scripts are removed.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)


def add_notebook_download(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any) -> None:
    """For a page built from a notebook, publish its executed .ipynb and tell the theme to offer it."""
    if app.builder.format != "html" or "kernelspec" not in app.env.metadata.get(pagename, {}):
        return
    executed = Path(app.outdir).parent / "jupyter_execute" / f"{pagename}.ipynb"
    if not executed.is_file():
        logger.warning("offline_site: no executed notebook for %s at %s", pagename, executed, location=pagename)
        return
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(executed, target)
    context["ipynb_source"] = f"{pagename}.ipynb"


def _is_thebe(asset: Any) -> bool:
    """True for sphinx-thebe's loader script and for its inline configuration that names the CDN."""
    filename = str(getattr(asset, "filename", "") or "")
    body = str(getattr(asset, "attributes", {}).get("body", "") or "")
    return "thebe" in filename or "THEBE_JS_URL" in body


def drop_thebe(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any) -> None:
    """Remove sphinx-thebe's scripts from the page (in place: later handlers share the list)."""
    scripts = context.get("script_files")
    if scripts is not None:
        scripts[:] = [js for js in scripts if not _is_thebe(js)]


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the two page hooks: before the theme builds its header buttons, and after all scripts are added."""
    app.connect("html-page-context", add_notebook_download, priority=400)
    app.connect("html-page-context", drop_thebe, priority=900)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
