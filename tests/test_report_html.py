"""report.html: the report as one self-contained page, opened in a real headless browser.

Playwright drives Debian's ``chromium`` (scripts/test.sh installs it; Playwright's own browser
download cannot reach its servers from the project's machines). The page is checked for its
tables (the same cells as report.md's, the report's numbers), its images (all loaded, all
inline), no console error, no request but the page's own file, and at a phone's width (360 px)
no sideways scroll of the page while every table stays reachable in its own box. The sweeps
are written by hand, as tests/test_report.py and tests/test_report_any_app.py write them.
"""

from __future__ import annotations

import io
import shutil
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pytest
from playwright.sync_api import sync_playwright
from test_report import paired_sweep, write_job
from test_report_any_app import two_groups, write_app_job

from rlsweep.report.build import Report, write_report
from rlsweep.report.html import markdown_tables
from rlsweep.report.render import group_values
from rlsweep.summary import summarize

REPS = 200  # bootstrap resamples: enough to check, quick
CHROMIUM = "/usr/bin/chromium"  # Debian's package (apt-get install chromium)
PHONE = {"width": 360, "height": 740}
DESKTOP = {"width": 1280, "height": 900}

# Every table as its rows of cell texts (header first); every image; every link.
TABLES_JS = """() => [...document.querySelectorAll('table')].map(t =>
    [...t.rows].map(r => [...r.cells].map(c => c.innerText.trim())))"""
IMAGES_JS = """() => [...document.images].map(i =>
    ({src: i.src.slice(0, 22), width: i.naturalWidth, complete: i.complete}))"""
LINKS_JS = "() => [...document.querySelectorAll('a')].map(a => a.href)"
# At the page's width: how wide the document is, and each table's box after scrolling it to
# its far end (its width, whether it overflowed, where its last header cell ends).
PHONE_JS = """() => {
  const boxes = [...document.querySelectorAll('.table')].map(box => {
    const overflows = box.scrollWidth > box.clientWidth;
    box.scrollLeft = box.scrollWidth;
    const last = box.querySelector('thead th:last-child').getBoundingClientRect();
    return {overflows, scrolled: box.scrollLeft, right: box.getBoundingClientRect().right,
            lastLeft: last.left, lastRight: last.right};
  });
  return {page: document.documentElement.scrollWidth, boxes};
}"""


# ============================================================================================
# The browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Debian chromium (never skipped: a missing browser is a failed set-up)."""
    if shutil.which(CHROMIUM) is None:
        pytest.fail(
            f"{CHROMIUM} not found: install Debian's chromium (apt-get install -y chromium; "
            "scripts/test.sh does it)",
            pytrace=False,
        )
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


class Opened:
    """A page opened from its file, with every console error, page error and request other
    than the file itself (refused) recorded."""

    def __init__(self, browser: Any, path: Path, viewport: dict[str, int]) -> None:
        self.url = path.as_uri()
        self.problems: list[str] = []
        self.page = browser.new_page(viewport=viewport)
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda exc: self.problems.append(f"page error: {exc}"))
        self.page.route("**/*", self._route)
        self.page.goto(self.url)

    def _console(self, message: Any) -> None:
        if message.type in ("error", "warning"):
            self.problems.append(f"console {message.type}: {message.text}")

    def _route(self, route: Any) -> None:
        if route.request.url == self.url:
            route.continue_()
        else:
            self.problems.append(f"request: {route.request.url}")
            route.abort()

    def js(self, code: str) -> Any:
        return self.page.evaluate(code)

    def close(self) -> list[str]:
        self.page.close()
        return self.problems


def _file(url: str) -> Path:
    return Path(unquote(urlparse(url).path))


def check_page(browser: Any, rep: Report) -> list[list[list[str]]]:
    """The checks every report.html passes, at a desktop's and a phone's width; its tables."""
    desktop = Opened(browser, rep.html, DESKTOP)
    tables = desktop.js(TABLES_JS)
    # report.md's tables, cell for cell, then the table of every job.
    assert tables[:-1] == markdown_tables(rep.text)
    assert tables[-1][0] == ["job directory", tables[-1][0][1], "replicate", "status", "error"]
    assert len(tables[-1]) == 1 + len(rep.runs)
    # The plots the report wrote, each loaded, each inline.
    images = desktop.js(IMAGES_JS)
    assert len(images) >= len(rep.plots) > 0
    for image in images:
        assert image["complete"] and image["width"] > 0 and image["src"] == "data:image/png;base64,"
    # Every link is relative to the page and reaches a job's directory or its error.txt.
    links = desktop.js(LINKS_JS)
    for url in links:
        assert url.startswith("file://") and _file(url).exists(), url
    directories = {_file(url) for url in links if url.endswith("/")}
    assert {r.path for r in rep.runs} <= directories
    assert desktop.close() == []

    phone = Opened(browser, rep.html, PHONE)
    layout = phone.js(PHONE_JS)
    assert layout["page"] <= PHONE["width"] + 1  # no sideways scroll of the whole page
    assert any(box["overflows"] for box in layout["boxes"])  # the wide tables scroll...
    for box in layout["boxes"]:  # ...inside their box, to their last column
        assert box["right"] <= PHONE["width"] + 1
        assert box["scrolled"] > 0 or not box["overflows"]
        assert box["lastLeft"] >= 0 and box["lastRight"] <= box["right"] + 1
    assert phone.close() == []
    return tables


def _row(tables: list[list[list[str]]], first: str) -> list[str]:
    return next(row for table in tables for row in table if row[0] == first)


def test_the_page_of_a_sweep_of_the_built_in_agents(browser: Any, tmp_path: Path) -> None:
    paired_sweep(tmp_path)
    write_job(tmp_path, "a", "F", 0, 30.0)  # a second env: more columns, one more table row
    write_job(tmp_path, "a", "E", 12, status="failed")
    write_job(tmp_path, "b", "E", 12, status="incomplete")
    rep = write_report([tmp_path], reps=REPS)
    tables = check_page(browser, rep)
    for cell in rep.groups:  # the report's numbers, as report.md formats them
        values = list(group_values(cell, built_in=True).values())
        assert next(r for r in tables[0] if r[:2] == values[:2]) == values
    assert len(tables) == 6  # cells, baselines, aggregates, P(X > Y), comparisons, jobs
    assert _row(tables, "agent=a,env=E,seed=12")[3:] == ["failed", "RuntimeError: boom error.txt"]


def test_the_page_of_any_apps_sweep(browser: Any, tmp_path: Path) -> None:
    two_groups(tmp_path, metrics=True)
    write_app_job(tmp_path, {"algo": "b", "lr": 0.1, "seed": 3}, status="failed")
    out = io.StringIO()
    summarize(tmp_path, stream=out)  # the end of a sweep writes the page too
    assert f"Report page: {tmp_path.resolve() / 'report.html'}" in out.getvalue()
    rep = write_report([tmp_path], reps=REPS)
    tables = check_page(browser, rep)
    for group in rep.groups:
        assert _row(tables, group.group) == list(group_values(group).values())
    assert len(tables) == 4  # groups, P(X > Y), comparisons, jobs


def test_the_page_of_a_grid_of_many_groups(browser: Any, tmp_path: Path) -> None:
    """Two swept keys, 12 groups of 2 replicates: the top groups, the metric against each
    key (a figure and a table per key), the pairwise sections bounded; the same checks."""
    for lr in (0.001, 0.01, 0.1):
        for width in (16, 32, 64, 128):
            for seed in range(2):
                score = width / 128 - abs(lr - 0.01) + seed / 10
                write_app_job(tmp_path, {"lr": lr, "width": width, "seed": seed}, {"score": score})
    rep = write_report([tmp_path], reps=REPS)
    tables = check_page(browser, rep)
    headers = [table[0][0] for table in tables]
    assert headers == ["rank", "lr", "width", "group", "comparison", "A − B", "job directory"]
    assert len(tables[0]) == 1 + 10 and len(tables[4]) == 1 + 28  # top 10; 8 best: 28 pairs
    assert [row[0] for row in tables[2][1:]] == ["16", "32", "64", "128"]  # numbers as numbers


# ============================================================================================
# The page's HTML, without a browser


class Parsed(HTMLParser):
    """Each element's attributes and text, by tag, in order."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.items: list[str] = []  # the text of each <li>
        self._item: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "li":
            self._item = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "li" and self._item is not None:
            self.items.append("".join(self._item))
            self._item = None

    def handle_data(self, data: str) -> None:
        if self._item is not None:
            self._item.append(data)

    def hrefs(self) -> list[str]:
        return [str(attrs["href"]) for tag, attrs in self.tags if tag == "a"]


def test_a_failed_job_is_listed_with_links_to_its_directory_and_error(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    write_job(sweep, "a", "E", 0, 10.0)
    write_job(sweep, "a", "E", 1, 20.0)
    failed = write_job(sweep, "a", "E", 2, status="failed")
    (failed / "error.txt").write_text("Traceback:\nValueError: <b>bad</b> & worse\n")
    rep = write_report([sweep], tmp_path / "out", reps=REPS)  # the page elsewhere: ../ links
    text = rep.html.read_text()
    page = Parsed(text)
    (item,) = [i for i in page.items if "replicate 2" in i]
    assert item == (
        "a on E, replicate 2: ValueError: <b>bad</b> & worse "
        "(../sweep/agent=a,env=E,seed=2, error.txt)"
    )
    assert "ValueError: &lt;b&gt;bad&lt;/b&gt; &amp; worse" in text  # escaped, never markup
    assert "<b>" not in text
    hrefs = page.hrefs()
    job = "../sweep/agent=a,env=E,seed=2/"
    assert hrefs.count(job) == 2  # in the failures' list and the table of every job
    assert hrefs.count(job + "error.txt") == 2
    assert {(rep.html.parent / h).resolve() for h in hrefs} == {
        *(r.path for r in rep.runs),
        failed / "error.txt",
    }
    # Nothing leaves the file: no script, no source but data: images, a strict policy.
    assert "<script" not in text and "://" not in text
    sources = [str(attrs["src"]) for tag, attrs in page.tags if tag == "img"]
    assert sources and all(src.startswith("data:image/png;base64,") for src in sources)
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in text
    # Same sweep, same bytes; the file is written atomically (no temporary file left).
    write_report([sweep], tmp_path / "out", reps=REPS)
    assert rep.html.read_text() == text
    assert not [p for p in rep.html.parent.iterdir() if p.name.startswith(".")]


def test_a_table_cell_holding_a_bar_stays_one_cell() -> None:
    from rlsweep.report.markdown import markdown_table

    lines = markdown_table(["group", "n"], [["x=a|b", "3"], ["x=c", "10"]])
    assert markdown_tables("\n".join(["text", "", *lines, "", "more"])) == [
        [["group", "n"], ["x=a|b", "3"], ["x=c", "10"]]
    ]
