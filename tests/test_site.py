"""The built website, as a reader meets it: served on 127.0.0.1 and opened in headless Chromium, offline.

Each page of the table of contents (and the search and index pages) is opened in pytest-playwright's `page`, with
every request to a host other than 127.0.0.1 aborted and recorded. Per page: no console error, no failed request,
no request outside the site (not even a reference in code that did not run), every image loaded and described by
alt text, every formula typeset by the local MathJax, one h1 and headings in order; and axe-core finds no serious or
critical accessibility violation once every folded answer and hidden cell is unfolded. Separately: every internal
link, resource and #anchor of every page leads somewhere (other hosts are never fetched), the search page finds
"LayerNorm", each chapter offers its notebook and links to its exercise and back, and screenshots of the home
page, a chapter and the glossary are saved to `_build/screenshots/`.

The site has three editions (English at the root, 简体中文 in zh-hans/, 繁體中文 in zh-hant/): every check above runs
on every page of each, and each English page's twins are checked for their language (<html lang>, prose mostly CJK,
繁體 in traditional characters), the same figures with Chinese alt texts, and language links that resolve both
ways; each Chinese search finds chapter 1 from the Chinese term.

The browser is Debian's /usr/bin/chromium (`make browser`; see `browser_type_launch_args` in conftest.py): if it
is missing these tests FAIL, they are not skipped. For development only, ADDNORM_SITE_HTML=<folder> points the
tests at an already built site instead of building the book.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlsplit

import opencc
import pytest
import yaml
from PIL import Image
from bs4 import BeautifulSoup
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import BrowserContext, Page

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
SITE_ENV = "ADDNORM_SITE_HTML"            # development only: test an already built site
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
NOT_PAGES = {"_static", "_sources", "_downloads", "_images"}
PAGE_TIMEOUT_MS = 60_000
AXE_FAILING_IMPACTS = {"serious", "critical"}     # axe-core's two highest impacts fail the test


def toc_pages() -> list[str]:
    """Every page the book must have: each file of _toc.yml as .html, plus Sphinx's search and index pages."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    files = [toc["root"]] + [chapter["file"] for part in toc.get("parts", []) for chapter in part["chapters"]]
    return [f"{Path(f).with_suffix('')}.html" for f in files] + ["search.html", "genindex.html"]


EDITION_FOLDERS = ("", "zh-hans/", "zh-hant/")   # English at the root, 简体 and 繁體 in their folders (same page paths)
ENGLISH_PAGES = toc_pages()
PAGES = [folder + page for folder in EDITION_FOLDERS for page in ENGLISH_PAGES]
CHAPTERS = [p for p in ENGLISH_PAGES if p.startswith("chapters/")]
EXERCISE_OF_CHAPTER = {                   # chapter page -> its exercise's label on guide/exercises.html
    "chapters/01_residual_connections.html": "exercise-01-residual",
    "chapters/02_layer_normalization.html": "exercise-02-layer-norm",
    "chapters/03_encoder_stack.html": "exercise-03-encoder-stack",
    "chapters/04_decoder_stack.html": "exercise-04-decoder-stack",
    "chapters/05_positional_encoding.html": "exercise-05-positional-encoding",
    "chapters/06_whole_transformer.html": "exercise-06-whole-transformer",
}
PAGES_WITH_MATH = {"glossary.html", "chapters/02_layer_normalization.html"}   # keep the formula check honest
SCREENSHOTS = {"home": "intro.html", "chapter": "chapters/02_layer_normalization.html", "glossary": "glossary.html",
               "chapter-zh-hans": "zh-hans/chapters/01_residual_connections.html",
               "chapter-zh-hant": "zh-hant/chapters/01_residual_connections.html"}


# --------------------------------------------------------------------------- the site, served


@pytest.fixture(scope="module")
def site(request: pytest.FixtureRequest) -> Path:
    """The folder of the built website: the session's book build, or ADDNORM_SITE_HTML while developing."""
    override = os.environ.get(SITE_ENV)
    root = Path(override).resolve() if override else request.getfixturevalue("built_book")
    if not (root / "intro.html").is_file():
        pytest.fail(f"no built website at {root} (intro.html is missing)")
    return root


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves files without logging every request to stderr."""

    def log_message(self, *args: object) -> None:
        """Log nothing."""


@contextlib.contextmanager
def serve(folder: Path) -> Iterator[str]:
    """Serve folder on 127.0.0.1 on a free port in a background thread; yield its URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def site_url(site: Path) -> Iterator[str]:
    """The URL of the site, served for this module's tests."""
    with serve(site) as url:
        yield url


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args: dict) -> dict:
    """Every page opens at 1280×900 with service workers blocked, so the route below sees every request."""
    return {**browser_context_args, "viewport": {"width": 1280, "height": 900}, "service_workers": "block"}


@pytest.fixture
def context(context: BrowserContext) -> BrowserContext:
    """pytest-playwright's context, cut off from the network: a request to a host other than 127.0.0.1 is aborted."""
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    context.route("**/*", lambda route: route.continue_() if urlsplit(route.request.url).hostname in LOOPBACK
                  else route.abort())
    return context


@pytest.fixture
def problems(page: Page) -> list[str]:
    """A list that fills with the console errors, failed requests and requests outside the site of `page`."""
    found: list[str] = []
    page.on("request", lambda req: urlsplit(req.url).hostname not in LOOPBACK and found.append(
        f"request outside the site (aborted): {req.url}"))
    page.on("console", lambda msg: msg.type == "error" and found.append(
        f"console error: {msg.text} (at {msg.location.get('url')}:{msg.location.get('lineNumber')})"))
    page.on("pageerror", lambda exc: found.append(f"uncaught exception: {exc}"))
    page.on("requestfailed", lambda req: found.append(f"failed request: {req.url}: {req.failure}"))
    page.on("response", lambda res: res.status >= 400 and found.append(f"failed request: {res.url}: HTTP {res.status}"))
    return found


def fail_if(problems: list[str], what: str) -> None:
    """Fail with every problem listed, one per line."""
    if problems:
        pytest.fail(f"{what} ({len(problems)}):\n  " + "\n  ".join(problems), pytrace=False)


def built_pages(site: Path) -> list[str]:
    """Every HTML page of the built site, relative to its root (asset folders excluded)."""
    pages = (p.relative_to(site).as_posix() for p in site.rglob("*.html"))
    return sorted(p for p in pages if not NOT_PAGES & set(p.split("/")))


def is_redirect(path: Path) -> bool:
    """Whether the page is a meta-refresh redirect (Jupyter Book writes index.html as one)."""
    return re.search(r'<meta[^>]+http-equiv="refresh"', path.read_text(encoding="utf-8"), re.I) is not None


def link_urls(page: Page) -> list[str]:
    """The absolute URL of every <a href> on the page, as the browser resolves it."""
    return page.eval_on_selector_all("a[href]", "links => links.map(a => a.href)")


# --------------------------------------------------------------------------- every page, in the browser


# Runs in the page once it has loaded: wait for MathJax's first typeset and for every image, then describe the page.
INSPECT_JS = r"""
async () => {
  const withTimeout = (promise, ms) => Promise.race([promise, new Promise(r => setTimeout(r, ms))]);
  if (window.MathJax && window.MathJax.startup && window.MathJax.startup.promise) {
    await withTimeout(window.MathJax.startup.promise, 30000);
  }
  const images = Array.from(document.images);
  for (const img of images) { if (img.loading === 'lazy') img.loading = 'eager'; }
  await withTimeout(Promise.all(images.map(img => img.complete ? null :
      new Promise(r => { img.addEventListener('load', r); img.addEventListener('error', r); }))), 30000);

  const visible = el => el.checkVisibility ? el.checkVisibility({checkVisibilityCSS: true})
                                            : el.getClientRects().length > 0;
  const skipTags = new Set(['PRE', 'CODE', 'SCRIPT', 'STYLE', 'TEXTAREA', 'MJX-CONTAINER']);
  const rawTex = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode;
    let el = node.parentElement, skip = false;
    while (el) { if (skipTags.has(el.tagName)) { skip = true; break; } el = el.parentElement; }
    if (!skip && /\\\(|\\\[|\\begin\{/.test(node.textContent)) rawTex.push(node.textContent.trim().slice(0, 100));
  }
  const loads = 'script[src], img[src], source[src], iframe[src], embed[src], video[src], audio[src], object[data], '
              + 'link[rel~=stylesheet], link[rel~=icon], link[rel~=preload], link[rel~=modulepreload]';
  return {
    mathjax: !!(window.MathJax && window.MathJax.startup),
    images: images.map(img => ({
      src: img.getAttribute('src'), alt: img.getAttribute('alt'),
      loaded: img.complete && img.naturalWidth > 0,
    })),
    objects: Array.from(document.querySelectorAll('object, iframe, embed')).map(o => o.outerHTML.slice(0, 120)),
    headings: Array.from(document.querySelectorAll('h1, h2, h3, h4, h5, h6')).filter(visible).map(h => ({
      level: Number(h.tagName[1]), text: h.textContent.replace(/[#¶]\s*$/, '').trim().slice(0, 80),
    })),
    math: Array.from(document.querySelectorAll('.math')).map(m => ({
      text: m.textContent.trim().slice(0, 80),
      rendered: !!m.querySelector('mjx-container'),
    })),
    // a TeX error (merror), or an undefined macro, which MathJax's noundefined package shows in red
    mathErrors: Array.from(document.querySelectorAll('mjx-container')).filter(c =>
        c.querySelector('mjx-merror, [data-mjx-error], mtext[mathcolor="red"]')).map(c => {
      const mml = c.querySelector('mjx-assistive-mml');
      const err = c.querySelector('[data-mjx-error]');
      return (err ? err.getAttribute('data-mjx-error') + ': ' : 'undefined macro: ')
             + (mml ? mml.textContent : c.textContent).trim().slice(0, 80);
    }),
    rawTex: rawTex,
    // what the page asks the browser to load from another host, and URLs named in inline scripts
    outsideLoads: Array.from(document.querySelectorAll(loads)).map(e => e.src || e.href || e.data)
        .filter(u => u && !u.startsWith(location.origin) && !u.startsWith('data:')),
    inlineScriptUrls: Array.from(document.querySelectorAll('script:not([src])'))
        .flatMap(s => s.textContent.match(/https?:\/\/[^\s"'<>]+/g) || []),
  };
}
"""


def image_problems(dom: dict) -> list[str]:
    """Images that did not load, or lack alt text that describes them; embedded objects with no <img> alternative."""
    found = [f"image did not load: {img['src']}" for img in dom["images"] if not img["loaded"]]
    for img in dom["images"]:
        alt = (img["alt"] or "").strip()
        if not alt:
            found.append(f"no alt text on {img['src']}")
        elif re.search(r"\.(png|jpe?g|svg|gif|webp)$", alt, re.I) or alt == img["src"]:
            found.append(f"alt text is a file name ({alt}); describe the figure with mystnb.image.alt in the cell's metadata")
    return found + [f"embedded object without an <img> alternative: {o}" for o in dom["objects"]]


def formula_problems(dom: dict) -> list[str]:
    """Formulas not typeset by the local MathJax, TeX errors and undefined macros, raw TeX left in the text."""
    if dom["math"] and not dom["mathjax"]:
        return [f"MathJax not loaded, formula left as text: {m['text']}" for m in dom["math"]]
    return ([f"formula not typeset: {m['text']}" for m in dom["math"] if not m["rendered"]]
            + [f"TeX error, {e}" for e in dom["mathErrors"]]
            + [f"raw TeX in the page text: {t}" for t in dom["rawTex"]])


def heading_problems(dom: dict) -> list[str]:
    """Not exactly one visible h1, a first heading that is not the h1, or a heading that skips a level down."""
    headings = dom["headings"]
    h1s = [h["text"] for h in headings if h["level"] == 1]
    found = [] if len(h1s) == 1 else [f"{len(h1s)} visible h1 elements {h1s}"]
    if headings and headings[0]["level"] != 1:
        found.append(f"the first heading is h{headings[0]['level']} ({headings[0]['text']})")
    return found + [f"h{a['level']} '{a['text']}' is followed by h{b['level']} '{b['text']}'"
                    for a, b in zip(headings, headings[1:]) if b["level"] > a["level"] + 1]


@pytest.mark.parametrize("path", PAGES)
def test_page_works_offline(path: str, page: Page, problems: list[str], site_url: str) -> None:
    """The page loads with no console error and no failed or outside request; images, formulas and headings are sound."""
    page.goto(site_url + path, wait_until="load")
    dom = page.evaluate(INSPECT_JS)
    page.wait_for_timeout(300)   # let late console messages and requests arrive
    if path.removeprefix("zh-hans/").removeprefix("zh-hant/") in PAGES_WITH_MATH and not dom["math"]:
        problems.append("no formula found here, so the formula check would be vacuous")
    problems += image_problems(dom) + formula_problems(dom) + heading_problems(dom)
    problems += [f"loads from another host: {u}" for u in dom["outsideLoads"]]
    problems += [f"an inline script names {u}" for u in dom["inlineScriptUrls"]]
    fail_if(problems, f"problems on {path}")


# Runs in the page before axe: unfold what a reader can unfold (folded answers and hidden cells: <details>;
# sphinx-togglebutton's dropdown admonitions), so their content is checked too, and wait for MathJax's typesetting.
EXPAND_JS = r"""
async () => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  document.querySelectorAll('button.toggle-button.toggle-button-hidden').forEach(b => b.click());
  if (window.MathJax && window.MathJax.startup && window.MathJax.startup.promise) await window.MathJax.startup.promise;
  return {closed: Array.from(document.querySelectorAll('details')).filter(d => !d.open).length,
          folded: document.querySelectorAll('.toggle-hidden').length};
}
"""


def axe_problems(response: dict) -> list[str]:
    """axe-core's serious and critical violations, one line each: rule, impact, what it means, where (first nodes)."""
    return [f"{v['id']} ({v['impact']}): {v['help']} — at {', '.join(str(n['target']) for n in v['nodes'][:3])}"
            + (f" and {len(v['nodes']) - 3} more" if len(v["nodes"]) > 3 else "")
            for v in response["violations"] if v.get("impact") in AXE_FAILING_IMPACTS]


@pytest.mark.parametrize("path", PAGES)
def test_page_is_accessible(path: str, page: Page, site_url: str) -> None:
    """axe-core (bundled with axe-playwright-python, injected from disk) finds no serious or critical violation on the
    page with every folded answer, hidden cell and dropdown unfolded."""
    page.goto(site_url + path, wait_until="load")
    unfolded = page.evaluate(EXPAND_JS)
    assert unfolded == {"closed": 0, "folded": 0}, f"widgets still folded before the check: {unfolded}"
    page.wait_for_timeout(200)
    response = Axe().run(page).response
    assert response["passes"], "axe ran no passing rule: it did not check the page"
    fail_if(axe_problems(response), f"accessibility violations on {path}")


def test_axe_catches_a_serious_violation(page: Page, tmp_path: Path) -> None:
    """The accessibility check above is not vacuous: an image without alt text and an unlabeled button fail it."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "index.html").write_text('<!doctype html><html lang="en"><head><title>t</title></head><body>'
                                                  '<main><h1>t</h1><img src="x.png"><button></button></main></body></html>')
    with serve(tmp_path / "site") as url:
        page.goto(url + "index.html")
        rules = {line.split(" ", 1)[0] for line in axe_problems(Axe().run(page).response)}
    assert {"image-alt", "button-name"} <= rules, rules


# --------------------------------------------------------------------------- the site as a whole


def test_every_built_page_is_checked(site: Path) -> None:
    """The pages checked above are exactly the pages built (redirect pages aside): none missing, none unchecked."""
    built = {p for p in built_pages(site) if not is_redirect(site / p)}
    assert built == set(PAGES), f"missing: {sorted(set(PAGES) - built)}; not checked: {sorted(built - set(PAGES))}"


LINKING_ATTRIBUTES = {"a": "href", "link": "href", "img": "src", "script": "src", "source": "src", "iframe": "src",
                      "embed": "src", "object": "data"}
CSS_URL = re.compile(r"url\(\s*['\"]?([^'\")]+)['\"]?\s*\)")


@functools.cache
def anchors(page: Path) -> frozenset[str]:
    """Every id (and <a name>) a page holds: what a #fragment can point to."""
    soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
    return frozenset([tag["id"] for tag in soup.find_all(id=True)] + [tag["name"] for tag in soup.find_all("a", attrs={"name": True})])


def target_problem(site: Path, origin: Path, url: str) -> str | None:
    """What is wrong with a link from `origin` to `url` inside the site (None if nothing): the file, or its anchor."""
    parts = urlsplit(url)   # (a ?query is the browser's cache key: the file is the path)
    if parts.scheme or parts.netloc or url.startswith("#") and not parts.fragment:
        return None                             # another host (never fetched; loads from one fail the page tests)
    target = (origin.parent / unquote(parts.path)).resolve() if parts.path else origin
    if target.is_dir():
        target = target / "index.html"
    if not target.is_relative_to(site.resolve()):
        return f"{url}: outside the site"
    if not target.is_file():
        return f"{url}: no such file"
    if parts.fragment and target.suffix == ".html" and unquote(parts.fragment) not in anchors(target):
        return f"{url}: no anchor #{unquote(parts.fragment)} in {target.relative_to(site.resolve())}"
    return None


def broken_links(site: Path) -> list[str]:
    """Every link, resource and #anchor of every page (and every url() of every stylesheet) that leads nowhere.

    (LinkChecker did this until the site had three editions: it fetches and parses a page again for every anchor
    that points into it, eight minutes for the three editions. This reads each file once.)"""
    found = []
    for page in [site / path for path in built_pages(site)]:     # the theme's template files in _static aside
        soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
        for tag, attribute in LINKING_ATTRIBUTES.items():
            for element in soup.find_all(tag, attrs={attribute: True}):
                if problem := target_problem(site, page, element[attribute]):
                    found.append(f"{page.relative_to(site)}: <{tag} {attribute}> {problem}")
    for css in sorted(site.rglob("*.css")):
        for url in CSS_URL.findall(css.read_text(encoding="utf-8", errors="replace")):
            if not url.startswith("data:") and (problem := target_problem(site, css, url)):
                found.append(f"{css.relative_to(site)}: url() {problem}")
    return found


def test_links_and_anchors_resolve(site: Path) -> None:
    """Every internal link, resource (scripts, styles, images, CSS url()) and #anchor of every page of the three
    editions exists."""
    assert len(list(site.rglob("*.html"))) >= 3 * len(ENGLISH_PAGES)
    fail_if(broken_links(site), "links that lead nowhere")


def test_the_link_check_catches_a_missing_file_and_a_missing_anchor(tmp_path: Path) -> None:
    """The link check above is not vacuous."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "index.html").write_text('<h1 id="top">Top</h1><a href="#top">ok</a><a href="#gone">broken</a>'
                                                  '<a href="other.html#top">gone</a><img src="x.png" alt="x">')
    (tmp_path / "site" / "other.html").write_text('<p id="top">other</p>')
    broken = broken_links(tmp_path / "site")
    assert broken == ["index.html: <a href> #gone: no anchor #gone in index.html",
                      "index.html: <img src> x.png: no such file"], broken
    (tmp_path / "site" / "other.html").unlink()
    assert "index.html: <a href> other.html#top: no such file" in broken_links(tmp_path / "site")


def test_nothing_in_the_stylesheets_comes_from_another_host(site: Path) -> None:
    """No stylesheet imports a font or image from another host, not even one that no page uses."""
    pattern = r"(?:@import\s+(?:url\()?|url\()\s*['\"]?((?:https?:)?//[^'\")\s]+)"
    fail_if([f"{css.relative_to(site)}: {url}" for css in (site / "_static").rglob("*.css")
             for url in re.findall(pattern, css.read_text(encoding="utf-8", errors="replace"))],
            "references to resources outside the site")


def test_mathjax_is_local(site: Path) -> None:
    """MathJax is served from _static (sphinx-mathjax-offline), with its fonts."""
    assert (site / "_static" / "mathjax" / "tex-chtml.js").is_file(), "no local MathJax in _static/mathjax"
    assert any((site / "_static" / "mathjax").rglob("*.woff*")), "MathJax's fonts were not copied"


def test_search_finds_layernorm(page: Page, problems: list[str], site_url: str) -> None:
    """The site's own search (no server, no network) finds pages for "LayerNorm"."""
    page.goto(site_url + "search.html?q=LayerNorm")
    page.wait_for_selector("#search-results li")
    results = page.eval_on_selector_all("#search-results li a", "links => links.map(a => a.getAttribute('href'))")
    assert any("glossary" in href or "layer_normalization" in href for href in results), results
    fail_if(problems, "problems on the search page")


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_chapter_offers_its_notebook_and_links_its_exercise(chapter: str, page: Page, site: Path, site_url: str) -> None:
    """The chapter has a download button for its executed .ipynb (a real notebook), and links to its exercise."""
    page.goto(site_url + chapter, wait_until="domcontentloaded")
    links = link_urls(page)
    notebooks = [u for u in links if "/_sources/" in u and u.endswith(".ipynb")]
    assert notebooks, f"{chapter}: no download button for its notebook"
    notebook = json.loads((site / notebooks[0].removeprefix(site_url)).read_text(encoding="utf-8"))
    assert notebook.get("cells"), f"{notebooks[0]} is not a notebook with cells"
    if chapter in EXERCISE_OF_CHAPTER:
        exercise = f"{site_url}guide/exercises.html#{EXERCISE_OF_CHAPTER[chapter]}"
        assert exercise in links, f"{chapter} does not link to its exercise, {exercise}"


def test_exercises_page_lists_and_links_every_exercise(page: Page, site_url: str) -> None:
    """The Exercises page carries every exercise label, a download of each learner notebook, and links back to each chapter."""
    page.goto(site_url + "guide/exercises.html", wait_until="domcontentloaded")
    links = link_urls(page)
    labels = EXERCISE_OF_CHAPTER.values()
    assert not [label for label in labels if page.locator(f"#{label}").count() != 1], "exercise labels missing"
    downloads = {u for u in links if "/_downloads/" in u and u.endswith(".ipynb")}
    capstone = {u for u in downloads if u.endswith("/your_transformer.ipynb")}
    assert len(capstone) == 1, f"the capstone notebook is not offered once: {sorted(downloads)}"
    assert len(downloads - capstone) == len(labels), f"expected {len(labels)} exercise notebooks, found {sorted(downloads)}"
    assert not [c for c in EXERCISE_OF_CHAPTER if site_url + c not in links], "chapters the Exercises page misses"


def test_home_page_has_the_three_diagrams(site: Path) -> None:
    """The encoder layer, the decoder layer and the whole stack, drawn by Graphviz at build time (they load: see above)."""
    diagrams = re.findall(r'<img src="(_images/graphviz-[0-9a-f]+\.png)"', (site / "intro.html").read_text(encoding="utf-8"))
    assert len(diagrams) == 3, f"expected 3 Graphviz diagrams on the home page, found {diagrams}"


def test_glossary_gives_chinese_names(site: Path) -> None:
    """Every glossary term carries its Traditional and Simplified Chinese names."""
    text = (site / "glossary.html").read_text(encoding="utf-8")
    entries = re.findall(r"<dt[^>]*>(.*?)</dt>\s*<dd>(.*?)</dd>", text, re.S)
    assert len(entries) >= 20, f"only {len(entries)} glossary entries found"
    fail_if([f"{re.sub(r'<[^>]+>', '', term).strip().rstrip('#¶').strip()}: no {lang} name"
             for term, definition in entries for lang in ("zh-Hant", "zh-Hans")
             if not re.search(rf'<span lang="{lang}">[^<]*[\u4e00-\u9fff]', definition)],
            "glossary entries without Chinese names")


@pytest.mark.parametrize("name", SCREENSHOTS)
def test_screenshot(name: str, page: Page, site: Path, site_url: str) -> None:
    """A screenshot of the home page, a chapter or the glossary in _build/screenshots/, for a person to look at."""
    page.goto(site_url + SCREENSHOTS[name])
    # a viewport as tall as the page draws the sticky sidebars whole (full_page=True clips them)
    height = page.evaluate("document.documentElement.scrollHeight")
    page.set_viewport_size({"width": 1280, "height": min(max(height, 900), 30000)})
    page.wait_for_timeout(300)
    target = site.parent / "screenshots" / f"{name}.png"
    target.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(target))
    with Image.open(target) as image:
        lo, hi = image.convert("L").getextrema()
        assert image.height > 900 and hi - lo > 100, f"{target} looks blank ({image.size}, gray {lo}..{hi})"


# --------------------------------------------------------------------------- the Chinese editions

CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
NOT_PROSE = ["pre", "code", "script", "style", "math", ".cell_input", ".cell_output", ".math", ".MathJax", "mjx-container",
             ".edition-switch", ".headerlink", "span[lang=zh-Hant]", "span[lang=zh-Hans]"]
NOT_TRANSLATED_PAGES = {"guide/execution_times.html"}     # a table of file names and times
HREFLANGS = {"": "en", "zh-hans/": "zh-Hans", "zh-hant/": "zh-Hant"}


def article(html: str) -> BeautifulSoup:
    """The page's text column (the theme's navigation and footer left out)."""
    soup = BeautifulSoup(html, "html.parser")
    return soup.select_one("article.bd-article") or soup


def prose_letters(html: str) -> tuple[int, int]:
    """(CJK characters, Latin letters) in the prose of a page: code cells, their outputs, inline code, math, the
    glossary's Chinese-name spans and the language switch left out."""
    text_column = article(html)
    for selector in NOT_PROSE:
        for element in text_column.select(selector):
            element.decompose()
    text = re.sub(r"\([A-Z][^()]*\d{4}[a-z]?\)", " ", text_column.get_text(" "))   # citations: (He et al. 2016)
    return len(CJK.findall(text)), len(re.findall(r"[A-Za-z]", text))


def figures(html: str) -> list[str]:
    """The alt text of every image in the page's text column."""
    return [img.get("alt", "") for img in article(html).select("img")]


@pytest.mark.parametrize("path", ENGLISH_PAGES)
def test_every_page_has_its_chinese_twins(path: str, site: Path) -> None:
    """Each twin: <html lang> of its edition, prose more than half CJK, the same figures with Chinese alt texts,
    繁體 in traditional characters, and a language switch and hreflang links that lead to each edition's page."""
    from addnorm_editions import terms, traditional

    fixes = traditional.corrections(terms.read_terms(ROOT / "glossary.md"))
    characters = opencc.OpenCC("s2t")     # one character alone: what it changes has a traditional form

    english = (site / path).read_text(encoding="utf-8")
    found = []
    for folder, lang in HREFLANGS.items():
        twin_file = site / folder / path
        if not twin_file.is_file():
            fail_if([f"{folder}{path} was not built"], "missing twin")
        twin = twin_file.read_text(encoding="utf-8")
        if f'<html lang="{lang}"' not in twin:
            found.append(f"{folder}{path}: not <html lang=\"{lang}\"")
        for other, other_lang in HREFLANGS.items():
            href = "../" * path.count("/") + ("../" if folder else "") + other + path
            for link in (f'<link rel="alternate" hreflang="{other_lang}" href="{href}">', f'href="{href}"'):
                if link not in twin:
                    found.append(f"{folder}{path}: no link to the {other_lang} page ({link})")
            if not (twin_file.parent / href).resolve().is_file():
                found.append(f"{folder}{path}: its {other_lang} link {href} leads nowhere")
        if not folder:
            continue
        cjk, latin = prose_letters(twin)
        if path not in NOT_TRANSLATED_PAGES and path not in ("search.html", "genindex.html") and cjk <= latin:
            found.append(f"{folder}{path}: prose {cjk} CJK characters against {latin} Latin letters")
        alts, english_alts = figures(twin), figures(english)
        if len(alts) != len(english_alts):
            found.append(f"{folder}{path}: {len(alts)} figures, the English page has {len(english_alts)}")
        found += [f"{folder}{path}: alt text not in Chinese: {alt[:80]!r}" for alt in alts if not CJK.search(alt)]
        if folder == "zh-hant/":
            text_column = article(twin)
            for element in text_column.select('[lang="zh-Hans"]'):   # the glossary's 简体 names, the switch
                element.decompose()
            text = text_column.get_text(" ")
            # derived again, the text changes only where a simplified character was left (OpenCC's phrase rules
            # also rewrite a few phrases of characters shared by both scripts: those are not counted)
            again = traditional.to_traditional(text, fixes)
            simplified = sorted({a for a, b in zip(text, again) if a != b and characters.convert(a) != a})
            if simplified:
                found.append(f"{folder}{path}: simplified characters in the 繁體 edition: {''.join(sorted(simplified))}")
    fail_if(found, f"the twins of {path}")


@pytest.mark.parametrize(("folder", "query"), [("zh-hans/", "残差连接"), ("zh-hant/", "殘差連接")])
def test_chinese_search_finds_chapter_1(folder: str, query: str, page: Page, problems: list[str], site_url: str) -> None:
    """Each Chinese edition's own search (words split by jieba with the glossary's terms at build time) finds the
    chapter on residual connections."""
    page.goto(f"{site_url}{folder}search.html?q={query}")
    page.wait_for_selector("#search-results li")
    results = page.eval_on_selector_all("#search-results li a", "links => links.map(a => a.getAttribute('href'))")
    assert any("01_residual_connections" in href for href in results), results
    fail_if(problems, f"problems on {folder}search.html")


@pytest.mark.parametrize(("folder", "sentence"), [("zh-hans/", "练习的笔记本保持英文"), ("zh-hant/", "練習的筆記本保持英文")])
def test_chinese_exercise_pages_say_the_notebooks_stay_english(folder: str, sentence: str, site: Path) -> None:
    """The exercise notebooks are not translated (their messages are checked word for word): each Chinese exercises
    page says so, and offers the very notebooks the English page offers."""
    def notebooks(html: str) -> list[str]:
        return sorted(Path(a["href"]).name for a in article(html).select("a[href]") if a["href"].endswith(".ipynb"))

    english = (site / "guide" / "exercises.html").read_text(encoding="utf-8")
    twin = (site / folder / "guide" / "exercises.html").read_text(encoding="utf-8")
    assert sentence in article(twin).get_text(), f"{folder}guide/exercises.html does not say the notebooks stay English"
    assert notebooks(twin) == notebooks(english) and len(notebooks(english)) >= 7, (notebooks(twin), notebooks(english))
