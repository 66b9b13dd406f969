"""The built website, as a reader meets it: served on 127.0.0.1 and opened in headless Chromium, offline.

Every page of `_build/html` is loaded once, with every request to a host other than 127.0.0.1 aborted (and
recorded). Then, per page: no console error, no failed request, no request outside the site, every image loaded,
every formula rendered by the local MathJax, one h1 and headings in order, alt text on every image. Separately:
the search page finds "LayerNorm", every internal link and #anchor resolves, each chapter offers its notebook
for download, and screenshots of the home page and of a chapter are saved to `_build/screenshots/`.

The browser is Debian's /usr/bin/chromium, driven by Playwright (`make browser` installs it). If it is missing
these tests FAIL, they are not skipped. For development only, ADDNORM_SITE_HTML=<folder> points the tests at an
already built site instead of building the book.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

import pytest

pytestmark = pytest.mark.slow

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run",
]
SITE_ENV = "ADDNORM_SITE_HTML"            # development only: test an already built site
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
NOT_PAGES = {"_static", "_sources", "_downloads", "_images"}
SCREENSHOT_CHAPTER = "chapters/02_layer_normalization.html"   # has formulas and figures
EXERCISE_CHAPTERS = {                     # exercise label on guide/exercises.html -> its chapter page
    "exercise-01-residual": "chapters/01_residual_connections.html",
    "exercise-02-layer-norm": "chapters/02_layer_normalization.html",
    "exercise-03-encoder-stack": "chapters/03_encoder_stack.html",
    "exercise-04-decoder-stack": "chapters/04_decoder_stack.html",
    "exercise-05-positional-encoding": "chapters/05_positional_encoding.html",
    "exercise-06-whole-transformer": "chapters/06_whole_transformer.html",
}
EXERCISE_LABELS = list(EXERCISE_CHAPTERS)
PAGE_TIMEOUT_MS = 60_000


# --------------------------------------------------------------------------- the site, served


@pytest.fixture(scope="module")
def site(request: pytest.FixtureRequest) -> Path:
    """The folder of the built website: the session's book build, or ADDNORM_SITE_HTML while developing."""
    override = os.environ.get(SITE_ENV)
    root = Path(override).resolve() if override else request.getfixturevalue("built_book")
    if not (root / "intro.html").is_file():
        pytest.fail(f"no built website at {root} (intro.html is missing)")
    return root


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serve files without logging every request to stderr."""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass


@pytest.fixture(scope="module")
def base_url(site: Path) -> Iterator[str]:
    """Serve the site on 127.0.0.1 on a free port, in a background thread, for the module's tests."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Debian Chromium through Playwright; fails (never skips) when either is missing."""
    if not CHROMIUM.is_file():
        pytest.fail(
            f"{CHROMIUM} is missing: the website tests need Debian's Chromium. Install it with `make browser` "
            "(or `apt-get install -y chromium`); Playwright's own browser download does not work here."
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:  # pragma: no cover - the course environment installs playwright
        pytest.fail(f"playwright is not installed in this environment ({exc}); run `make` to install the course")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def html_pages(site: Path) -> list[str]:
    """Every HTML page of the site, as a path relative to its root (assets folders excluded)."""
    pages = [p.relative_to(site).as_posix() for p in site.rglob("*.html")]
    return sorted(p for p in pages if p.split("/", 1)[0] not in NOT_PAGES)


def redirect_target(path: Path) -> str | None:
    """The target of a meta-refresh redirect page (Jupyter Book writes index.html as one), else None."""
    text = path.read_text(encoding="utf-8", errors="replace")
    match = re.search(r'<meta[^>]+http-equiv="refresh"[^>]+content="\d+;\s*url=([^"]+)"', text, re.I)
    return match.group(1) if match else None


# --------------------------------------------------------------------------- one visit per page


@dataclass
class PageReport:
    """What one page did in the browser."""

    path: str
    console_errors: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)
    outside_requests: list[str] = field(default_factory=list)
    dom: dict[str, Any] = field(default_factory=dict)


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
  };
}
"""


def visit(browser: Any, url: str, path: str) -> tuple[PageReport, Any, Any]:
    """Open one page with the network cut off outside 127.0.0.1; return its report, page and context."""
    report = PageReport(path)
    context = browser.new_context(viewport={"width": 1280, "height": 900}, service_workers="block")

    def route(route: Any) -> None:
        request_url = route.request.url
        if urlsplit(request_url).hostname in LOOPBACK:
            route.continue_()
        else:
            report.outside_requests.append(request_url)
            route.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.on("console", lambda msg: msg.type == "error" and report.console_errors.append(
        f"{msg.text} (at {msg.location.get('url', '?')}:{msg.location.get('lineNumber', '?')})"))
    page.on("pageerror", lambda exc: report.console_errors.append(f"uncaught exception: {exc}"))
    page.on("requestfailed", lambda req: report.failed_requests.append(f"{req.url}: {req.failure}"))
    page.on("response", lambda res: res.status >= 400 and report.failed_requests.append(f"{res.url}: HTTP {res.status}"))
    page.goto(url, wait_until="load", timeout=PAGE_TIMEOUT_MS)
    report.dom = page.evaluate(INSPECT_JS)
    page.wait_for_timeout(300)   # let late console messages and requests arrive
    return report, page, context


@pytest.fixture(scope="module")
def reports(site: Path, base_url: str, browser: Any) -> dict[str, PageReport]:
    """Every content page visited once in Chromium (redirect pages are checked in test_redirects_resolve)."""
    result: dict[str, PageReport] = {}
    for path in html_pages(site):
        if redirect_target(site / path) is not None:
            continue
        report, page, context = visit(browser, base_url + path, path)
        context.close()
        result[path] = report
    return result


def _fail_if(problems: list[str], what: str) -> None:
    """Fail with every problem listed, one per line."""
    if problems:
        pytest.fail(f"{what} ({len(problems)}):\n  " + "\n  ".join(problems), pytrace=False)


# --------------------------------------------------------------------------- per-page checks, in the browser


def test_every_toc_page_is_built(site: Path, repo_root: Path) -> None:
    """Each file in _toc.yml became an HTML page (plus the search and index pages)."""
    import yaml

    toc = yaml.safe_load((repo_root / "_toc.yml").read_text(encoding="utf-8"))
    files = [toc["root"]]
    for part in toc.get("parts", []):
        files += [chapter["file"] for chapter in part.get("chapters", [])]
    expected = [f"{f.removesuffix('.md').removesuffix('.ipynb')}.html" for f in files] + ["search.html", "genindex.html"]
    _fail_if([p for p in expected if not (site / p).is_file()], "pages missing from the built site")


def test_pages_were_visited(reports: dict[str, PageReport]) -> None:
    """The browser really opened the pages (guards the other checks against an empty run)."""
    assert "intro.html" in reports and "search.html" in reports, sorted(reports)
    assert len(reports) >= 5, f"only {len(reports)} pages visited: {sorted(reports)}"


def test_no_request_leaves_the_site(reports: dict[str, PageReport]) -> None:
    """Nothing is fetched from another host: no CDN script, font, stylesheet or tracker."""
    _fail_if([f"{r.path}: {u}" for r in reports.values() for u in r.outside_requests],
             "requests to hosts other than 127.0.0.1 (aborted)")


def test_no_console_errors(reports: dict[str, PageReport]) -> None:
    """A fresh browser logs no JavaScript error on any page."""
    _fail_if([f"{r.path}: {e}" for r in reports.values() for e in r.console_errors], "console errors")


def test_no_failed_requests(reports: dict[str, PageReport]) -> None:
    """Every script, stylesheet, font and image a page asks for is served."""
    _fail_if([f"{r.path}: {e}" for r in reports.values() for e in r.failed_requests], "failed requests")


def test_every_image_loads(reports: dict[str, PageReport]) -> None:
    """Every <img> finished loading with a real size (naturalWidth > 0)."""
    _fail_if([f"{r.path}: {img['src']}" for r in reports.values() for img in r.dom["images"] if not img["loaded"]],
             "images that did not load")


def test_every_formula_renders(reports: dict[str, PageReport]) -> None:
    """Every math element was typeset by the local MathJax, with no TeX error or undefined macro, and no raw \\( is left."""
    problems = []
    for r in reports.values():
        for m in r.dom["math"]:
            if not r.dom["mathjax"]:
                problems.append(f"{r.path}: MathJax not loaded, formula left as text: {m['text']}")
            elif not m["rendered"]:
                problems.append(f"{r.path}: not typeset: {m['text']}")
        problems += [f"{r.path}: TeX error, {e}" for e in r.dom["mathErrors"]]
        problems += [f"{r.path}: raw TeX in the page text: {t}" for t in r.dom["rawTex"]]
    _fail_if(problems, "formulas not rendered")


def test_math_is_present_where_expected(reports: dict[str, PageReport]) -> None:
    """The formula check above is not vacuous: the glossary's formulas exist and were typeset."""
    glossary = reports["glossary.html"].dom
    assert glossary["math"], "the glossary has no math elements: the formula check would be vacuous"
    assert all(m["rendered"] for m in glossary["math"])


def test_images_have_alt_text(reports: dict[str, PageReport]) -> None:
    """Every image has alt text that describes it (not empty, not a file name)."""
    problems = []
    for r in reports.values():
        for img in r.dom["images"]:
            alt = (img["alt"] or "").strip()
            if not alt:
                problems.append(f"{r.path}: no alt text on {img['src']}")
            elif re.search(r"\.(png|jpe?g|svg|gif|webp)$", alt, re.I) or alt == img["src"]:
                problems.append(f"{r.path}: alt text is a file name ({alt}); describe the figure with "
                                f"mystnb.image.alt in the cell's metadata")
        problems += [f"{r.path}: embedded object without an <img> alternative: {o}" for o in r.dom["objects"]]
    _fail_if(problems, "images without alt text")


def test_one_h1_and_headings_in_order(reports: dict[str, PageReport]) -> None:
    """Each page has exactly one visible h1, first, and no heading skips a level on the way down."""
    problems = []
    for r in reports.values():
        headings = r.dom["headings"]
        h1s = [h["text"] for h in headings if h["level"] == 1]
        if len(h1s) != 1:
            problems.append(f"{r.path}: {len(h1s)} visible h1 elements {h1s}")
        if headings and headings[0]["level"] != 1:
            problems.append(f"{r.path}: the first heading is h{headings[0]['level']} ({headings[0]['text']})")
        for before, after in zip(headings, headings[1:]):
            if after["level"] > before["level"] + 1:
                problems.append(f"{r.path}: h{before['level']} '{before['text']}' is followed by "
                                f"h{after['level']} '{after['text']}'")
    _fail_if(problems, "heading structure problems")


# --------------------------------------------------------------------------- the search page


def test_search_finds_layernorm(browser: Any, base_url: str) -> None:
    """The site's own search (no server, no network) finds pages for "LayerNorm"."""
    report, page, context = visit(browser, base_url + "search.html?q=LayerNorm", "search.html?q=LayerNorm")
    try:
        page.wait_for_selector("#search-results li", timeout=PAGE_TIMEOUT_MS)
        results = page.eval_on_selector_all("#search-results li a", "links => links.map(a => a.getAttribute('href'))")
    finally:
        context.close()
    assert results, "searching for LayerNorm returned no result"
    assert any("glossary" in href or "layer_normalization" in href for href in results), results
    _fail_if(report.console_errors + report.failed_requests + report.outside_requests, "problems on the search page")


# --------------------------------------------------------------------------- static checks of the HTML


class _LinkParser(HTMLParser):
    """Collects the links, resources, ids and inline scripts of one HTML page."""

    RESOURCE_ATTRS = {"script": "src", "img": "src", "source": "src", "iframe": "src", "embed": "src",
                      "video": "src", "audio": "src", "object": "data", "link": "href"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []          # <a href>: navigated to, may point outside
        self.resources: list[str] = []      # loaded by the browser: must stay inside the site
        self.ids: set[str] = set()
        self.inline_scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v for k, v in attrs if v is not None}
        for key in ("id", "name") if tag == "a" else ("id",):
            if key in a:
                self.ids.add(a[key])
        if tag == "a" and "href" in a:
            self.links.append(a["href"])
        elif tag in self.RESOURCE_ATTRS and self.RESOURCE_ATTRS[tag] in a:
            if tag == "link" and not set(a.get("rel", "").split()) & {"stylesheet", "icon", "preload", "modulepreload"}:
                self.links.append(a["href"])   # rel=next/prev/index/search: navigation, not a load
            else:
                self.resources.append(a[self.RESOURCE_ATTRS[tag]])
        self._in_script = tag == "script" and "src" not in a

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script and data.strip():
            self.inline_scripts.append(data)


@functools.lru_cache(maxsize=None)
def _parse(path: Path) -> _LinkParser:
    parser = _LinkParser()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    return parser


def _resolve(site: Path, page: str, href: str) -> tuple[Path | None, str]:
    """The file and #fragment an in-site href points to (file None when it leaves the site)."""
    absolute = urljoin(f"http://site.invalid/{page}", href)
    parts = urlsplit(absolute)
    if parts.hostname != "site.invalid":
        return None, ""
    target = site / unquote(parts.path).lstrip("/")
    if target.is_dir():
        target = target / "index.html"
    return target, unquote(parts.fragment)


def test_internal_links_resolve(site: Path) -> None:
    """Every in-site link and resource points at an existing file, and every #anchor at an existing id."""
    problems = []
    for page in html_pages(site):
        parsed = _parse(site / page)
        for href in parsed.links + parsed.resources:
            if href.startswith(("mailto:", "javascript:", "data:", "tel:")) or href in ("", "#"):
                continue
            target, fragment = _resolve(site, page, href)
            if target is None:
                continue                     # a link to another site: allowed for <a>, checked below for loads
            if not target.is_file():
                problems.append(f"{page}: {href} -> missing file {target.relative_to(site)}")
            elif fragment and target.suffix == ".html" and fragment not in _parse(target).ids:
                problems.append(f"{page}: {href} -> no id '{fragment}' in {target.relative_to(site)}")
    _fail_if(problems, "broken internal links")


def test_redirects_resolve(site: Path) -> None:
    """Redirect pages (index.html → intro.html) point at a page that exists."""
    problems = []
    for page in html_pages(site):
        target = redirect_target(site / page)
        if target is not None:
            resolved, _ = _resolve(site, page, target)
            if resolved is None or not resolved.is_file():
                problems.append(f"{page} redirects to {target}, which does not exist")
    _fail_if(problems, "broken redirects")


def test_no_page_refers_to_a_cdn(site: Path) -> None:
    """No page asks the browser to load anything from another host, not even in code that did not run."""
    problems = []
    for page in html_pages(site):
        parsed = _parse(site / page)
        problems += [f"{page}: loads {r}" for r in parsed.resources if _resolve(site, page, r)[0] is None
                     and not r.startswith("data:")]
        problems += [f"{page}: an inline script names {m}" for s in parsed.inline_scripts
                     for m in re.findall(r"https?://[^\s\"'<>]+", s)]
    for css in (site / "_static").rglob("*.css"):
        text = css.read_text(encoding="utf-8", errors="replace")
        problems += [f"{css.relative_to(site)}: {m}" for m in
                     re.findall(r"(?:@import\s+(?:url\()?|url\()\s*['\"]?((?:https?:)?//[^'\")\s]+)", text)]
    _fail_if(problems, "references to resources outside the site")


def test_mathjax_is_local(site: Path) -> None:
    """MathJax is served from _static (sphinx-mathjax-offline), with its fonts."""
    assert (site / "_static" / "mathjax" / "tex-chtml.js").is_file(), "no local MathJax in _static/mathjax"
    assert any((site / "_static" / "mathjax").rglob("*.woff*")), "MathJax's fonts were not copied"


def test_chapters_offer_their_notebook(site: Path) -> None:
    """Each chapter page has a download button for its executed .ipynb, and the file is a notebook."""
    problems = []
    chapters = sorted((site / "chapters").glob("*.html"))
    assert chapters, "no chapter pages were built"
    for chapter in chapters:
        page = chapter.relative_to(site).as_posix()
        notebooks = [h for h in _parse(chapter).links if h.split("#")[0].endswith(".ipynb") and "_sources/" in h]
        if not notebooks:
            problems.append(f"{page}: no download button for its notebook")
            continue
        target, _ = _resolve(site, page, notebooks[0])
        try:
            nb = json.loads(target.read_text(encoding="utf-8")) if target and target.is_file() else None
        except json.JSONDecodeError:
            nb = None
        if not nb or "cells" not in nb:
            problems.append(f"{page}: {notebooks[0]} is not a notebook")
    _fail_if(problems, "chapters without a notebook download")


def test_exercises_page_lists_every_exercise(site: Path) -> None:
    """The Exercises page carries every exercise label, and a download link to each learner notebook."""
    parsed = _parse(site / "guide" / "exercises.html")
    missing = [label for label in EXERCISE_LABELS if label not in parsed.ids]
    downloads = [h for h in parsed.links if h.endswith(".ipynb") and "_downloads/" in h]
    assert not missing, f"exercise labels missing from guide/exercises.html: {missing}"
    assert len(set(downloads)) == len(EXERCISE_LABELS), f"expected 5 notebook downloads, found {downloads}"


def test_chapters_and_exercises_link_both_ways(site: Path) -> None:
    """Each chapter links to its exercise's section, and the Exercises page links back to each chapter."""
    exercises_page = site / "guide" / "exercises.html"
    back = {_resolve(site, "guide/exercises.html", h)[0] for h in _parse(exercises_page).links}
    problems = []
    for label, chapter in EXERCISE_CHAPTERS.items():
        if not (site / chapter).is_file():
            problems.append(f"{chapter} was not built")
            continue
        forward = {_resolve(site, chapter, h) for h in _parse(site / chapter).links}
        if (exercises_page, label) not in forward:
            problems.append(f"{chapter} does not link to guide/exercises.html#{label}")
        if site / chapter not in back:
            problems.append(f"guide/exercises.html does not link to {chapter}")
    _fail_if(problems, "missing links between chapters and exercises")


def test_home_page_has_the_three_diagrams(site: Path) -> None:
    """The encoder layer, the decoder layer and the whole stack, drawn by Graphviz at build time, with alt text."""
    diagrams = [r for r in _parse(site / "intro.html").resources if "/graphviz-" in f"/{r}" and r.endswith(".png")]
    assert len(diagrams) == 3, f"expected 3 Graphviz diagrams on the home page, found {diagrams}"
    assert all((site / d).is_file() for d in diagrams), diagrams


def test_glossary_gives_chinese_names(site: Path) -> None:
    """Every glossary term carries its Traditional and Simplified Chinese names."""
    text = (site / "glossary.html").read_text(encoding="utf-8")
    entries = re.findall(r"<dt[^>]*>(.*?)</dt>\s*<dd>(.*?)</dd>", text, re.S)
    assert len(entries) >= 20, f"only {len(entries)} glossary entries found"
    problems = []
    for term, definition in entries:
        name = re.sub(r"<[^>]+>", "", term).strip().rstrip("#¶").strip()
        for lang in ("zh-Hant", "zh-Hans"):
            if not re.search(rf'<span lang="{lang}">[^<]*[\u4e00-\u9fff]', definition):
                problems.append(f"{name}: no {lang} name")
    _fail_if(problems, "glossary entries without Chinese names")


# --------------------------------------------------------------------------- screenshots


def test_screenshots(browser: Any, base_url: str, site: Path) -> None:
    """Full-page screenshots of the home page, a chapter and the glossary, for a person to look at."""
    from PIL import Image

    out = site.parent / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    chapter = SCREENSHOT_CHAPTER if (site / SCREENSHOT_CHAPTER).is_file() else "chapters/01_residual_connections.html"
    shots = {"home": "intro.html", "chapter": chapter, "glossary": "glossary.html"}
    for name, path in shots.items():
        report, page, context = visit(browser, base_url + path, path)
        try:
            target = out / f"{name}.png"
            # a viewport as tall as the page draws the sticky sidebars whole (full_page=True clips them)
            height = page.evaluate("document.documentElement.scrollHeight")
            page.set_viewport_size({"width": 1280, "height": min(max(height, 900), 30000)})
            page.wait_for_timeout(300)
            page.screenshot(path=str(target))
        finally:
            context.close()
        with Image.open(target) as image:
            lo, hi = image.convert("L").getextrema()
            assert image.height > 900 and hi - lo > 100, f"{target} looks blank ({image.size}, gray {lo}..{hi})"
