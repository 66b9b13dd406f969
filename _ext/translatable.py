"""Two things Sphinx's translation step misses on this site, made translatable for the Chinese editions.

1. Glued numbers in a translated message. Sphinx's Locale transform parses each translated message as a small
   document of its own; myst-nb has removed its renderer (which holds the page's glue data) by then, so a same-page
   {glue:text}`key` fails. In a translated message the role becomes a pending reference to this page's glue,
   `/chapters/x.md::key`, which myst-nb resolves after reading from _build/jupyter_execute/<page>.glue.json.
2. Code cells' outputs are shared by the three editions: the words of a table or text a cell printed are not
   messages to translate (a figure's caption and alt text, from the cell's metadata, are).
3. The table of contents' part captions ("Chapters"): sphinx-external-toc inserts the toctree after Sphinx's
   translation step, so they are extracted as messages but never translated; they are, once inserted.
4. Diagram alt texts. sphinx.ext.graphviz keeps `:alt:` as an attribute of its own node, which Sphinx neither
   extracts nor translates. A hidden translatable child carries it: the gettext builder extracts it, the Locale
   transform hands the translation back to the diagram, and graphviz's writers skip the child.
"""
from __future__ import annotations

from pathlib import Path

from docutils import nodes
from myst_nb.ext.glue import roles
from sphinx import addnodes
from sphinx.ext.graphviz import graphviz
from sphinx.locale import init as init_locale
from sphinx.transforms import SphinxTransform
from sphinx.util.i18n import docname_to_domain


def _glue_from_the_page_file(run):
    def wrapped(self):
        in_translation = str(self.document.get("source", "")).endswith("<translated>")
        if in_translation and "::" not in self.text and "nb_renderer" not in self.document:
            env = self.document.settings.env
            key = self.text
            if isinstance(self, roles.PasteTextRole) and ":" not in key:
                key += ":s"   # the text role splits a format off at the last ":", which "page::key" alone would give
            self.text = "/" + str(env.doc2path(env.docname, base=False)) + "::" + key
        return run(self)
    wrapped.translatable = True
    return wrapped


class KeepOutputsAsTheyAre(SphinxTransform):
    """Mark the text a cell printed (outside figure captions) as not translatable."""
    default_priority = 9    # before Sphinx's PreserveTranslatableMessages (10) and Locale (20)

    def apply(self, **kwargs) -> None:
        for output in self.document.findall(nodes.Element):
            if "cell_output" not in output.get("classes", []):
                continue
            for text in output.findall(nodes.TextElement):
                if not any(isinstance(parent, nodes.caption) for parent in _ancestors(text, output)):
                    text["translatable"] = False


def _ancestors(node: nodes.Node, stop: nodes.Node):
    while node is not None and node is not stop:
        yield node
        node = node.parent


class TranslateTocCaptions(SphinxTransform):
    """Translate the captions of the toctrees sphinx-external-toc inserted (at priority 100, after Locale's 20)."""
    default_priority = 110

    def apply(self, **kwargs) -> None:
        if not self.config.language or self.config.language == "en":
            return
        directories = [str(Path(self.env.srcdir) / folder) for folder in self.config.locale_dirs]
        domain = docname_to_domain(self.env.docname, self.config.gettext_compact)
        catalog, found = init_locale(directories, self.config.language, domain)
        for toctree in self.document.findall(addnodes.toctree):
            if found and toctree.get("caption"):
                toctree["caption"] = catalog.gettext(toctree["rawcaption"] or toctree["caption"])


class graphviz_alt(addnodes.translatable, nodes.Element):
    """The alt text of the graphviz node it sits in, as a message Sphinx extracts and translates."""

    def preserve_original_messages(self) -> None:
        self["original_alt"] = self["alt"]

    def apply_translated_message(self, original_message: str, translated_message: str) -> None:
        if self["alt"] == original_message:
            self["alt"] = self.parent["alt"] = translated_message

    def extract_original_messages(self) -> list[str]:
        return [self.get("original_alt", self["alt"])]


class AddGraphvizAlt(SphinxTransform):
    """Give every diagram with an alt text its hidden translatable child."""
    default_priority = 9    # before Sphinx's PreserveTranslatableMessages (10) and Locale (20)

    def apply(self, **kwargs) -> None:
        for node in self.document.findall(graphviz):
            if node.get("alt") and not any(isinstance(child, graphviz_alt) for child in node.children):
                child = graphviz_alt(alt=node["alt"])
                child.source, child.line = node.source or self.document["source"], node.line
                node.append(child)


def setup(app):
    for role in (roles.PasteRoleAny, roles.PasteTextRole, roles.PasteMarkdownRole):
        if not getattr(role.run, "translatable", False):
            role.run = _glue_from_the_page_file(role.run)
    app.add_node(graphviz_alt)
    app.add_transform(AddGraphvizAlt)
    app.add_transform(KeepOutputsAsTheyAre)
    app.add_transform(TranslateTocCaptions)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
