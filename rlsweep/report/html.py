"""report.html: the report as one self-contained page, readable at a phone's width.

The page is report.md rendered to HTML (:mod:`rlsweep.report.render`): the same sections, sentences and tables, so the two never
disagree. The tables are read back from :func:`~rlsweep.report.markdown.markdown_table`'s
padding (column by column width, so a cell holding ``|`` stays one cell) into real HTML tables,
each scrolling sideways in its own box; the plots it shows are inlined as data URIs. The job
directories it names become links (a failed job's error.txt beside), and a last section lists
every job with a link to its directory. Links are relative to the page.

Nothing on the page reaches the network: the style is inline, there is no script, and its
Content-Security-Policy allows data: images and the inline style only. A pure function of the
report's content, its Markdown and the PNGs it names: the same sweep gives the same bytes.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping, Sequence
from html import escape
from itertools import groupby
from pathlib import Path
from urllib.parse import quote

from rlsweep.report.markdown import Content, where
from rlsweep.report.render import grid_of
from rlsweep.report.runs import Run, run_order
from rlsweep.store import ERROR_FILE

__all__ = ["markdown_tables", "render_html"]

_HEADING = re.compile(r"(#{1,6}) (.*)")
_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)]*)\)")
_CODE = re.compile(r"`([^`]*)`")
_RULE = re.compile(r"\|(-+\|)+")

_STYLE = """\
body { margin: 0 auto; max-width: 72rem; padding: 0 1rem 2rem; color: #1f2328;
  background: #fff; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif;
  overflow-wrap: anywhere; }
h1 { font-size: 1.6rem; }
h2 { font-size: 1.3rem; margin-top: 2rem; border-bottom: 1px solid #d1d9e0; }
h3 { font-size: 1.1rem; }
code { font: 0.9em ui-monospace, "SFMono-Regular", Menlo, monospace; background: #f3f4f6;
  padding: 0 0.2em; border-radius: 3px; }
a { color: #0550ae; }
.table { overflow-x: auto; margin: 1rem 0; }
table { border-collapse: collapse; font-size: 0.9rem; overflow-wrap: normal;
  font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #d1d9e0; padding: 0.25rem 0.5rem; text-align: left;
  vertical-align: top; white-space: nowrap; }
thead th { background: #f6f8fa; }
tbody tr:nth-child(even) { background: #fafbfc; }
figure { margin: 1rem 0; }
img { display: block; max-width: 100%; height: auto; }
"""
_POLICY = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def _href(path: Path, out_dir: Path, *, directory: bool = False) -> str:
    """``path`` as a link relative to the page (``:`` escaped: never read as a scheme)."""
    return escape(quote(where(path, out_dir) + ("/" if directory else ""), safe="/=,+@"))


def _error_link(run: Run, out_dir: Path, before: str) -> str:
    """``before`` and a link to a failed job's error.txt; nothing for any other job."""
    if run.status != "failed":
        return ""
    return f'{before}<a href="{_href(run.path / ERROR_FILE, out_dir)}">{ERROR_FILE}</a>'


def _job_links(c: Content) -> dict[str, str]:
    """The HTML of every job directory report.md names (as `code`, relative to the report):
    a link to the directory, then to its error.txt if it failed."""
    links = {}
    for run in (*c.runs, *c.superseded, *c.unplaced):
        text = where(run.path, c.out_dir)
        href = _href(run.path, c.out_dir, directory=True)
        link = f'<a href="{href}"><code>{escape(text)}</code></a>'
        links[text] = link + _error_link(run, c.out_dir, ", ")
    return links


def _inline(text: str, links: Mapping[str, str]) -> str:
    """A line of report.md: its text escaped, `code` as <code> (a job directory as its links)."""
    parts = _CODE.split(text)  # text, code, text, ..., text
    return "".join(
        escape(part) if i % 2 == 0 else links.get(part, f"<code>{escape(part)}</code>")
        for i, part in enumerate(parts)
    )


# --------------------------------------------------------------------------------------------
# Tables


def _table_cells(lines: Sequence[str]) -> list[list[str]] | None:
    """A table of :func:`~rlsweep.report.markdown.markdown_table`, header first, its cells
    cut at the widths of its rule line; None if ``lines`` are not one."""
    if len(lines) < 2 or not _RULE.fullmatch(lines[1]):
        return None
    widths = [len(dashes) - 2 for dashes in lines[1][1:-1].split("|")]
    rows = []
    for line in (lines[0], *lines[2:]):
        if len(line) != sum(widths) + 3 * len(widths) + 1:
            return None
        starts = [2 + sum(widths[:i]) + 3 * i for i in range(len(widths))]
        # A cell's ``\|`` (markdown_table's escape) is its text's bar.
        cells = [line[at : at + w].rstrip() for at, w in zip(starts, widths, strict=True)]
        rows.append([cell.replace("\\|", "|") for cell in cells])
    return rows


def markdown_tables(text: str) -> list[list[list[str]]]:
    """Every table of a report.md, each as its rows of cells (header first)."""
    tables = []
    for is_table, group in groupby(text.splitlines(), key=lambda line: line.startswith("|")):
        cells = _table_cells(list(group)) if is_table else None
        if cells is not None:
            tables.append(cells)
    return tables


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """An HTML table of cells already in HTML, in a box that scrolls sideways."""
    head = "".join(f'<th scope="col">{cell}</th>' for cell in header)
    body = ["<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows]
    return "\n".join(
        [
            '<div class="table" tabindex="0">',
            f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>",
            *body,
            "</tbody>\n</table>\n</div>",
        ]
    )


# --------------------------------------------------------------------------------------------
# Blocks of report.md


def _kind(line: str) -> str:
    if not line.strip():
        return "blank"
    if _HEADING.fullmatch(line):
        return "heading"
    if line.startswith("|"):
        return "table"
    if line.startswith("- "):
        return "item"
    return "image" if _IMAGE.fullmatch(line) else "text"


def _heading(line: str, links: Mapping[str, str]) -> str:
    match = _HEADING.fullmatch(line)
    marks, title = match.groups() if match else ("", line)
    level = len(marks)
    return f"<h{level}>{_inline(title, links)}</h{level}>"


def _figure(line: str, c: Content) -> str:
    """A plot the report wrote, inlined as a PNG data URI (anything else: its alt text)."""
    match = _IMAGE.fullmatch(line)
    alt, name = match.groups() if match else (line, "")
    if name not in c.plot_names.values():
        return f"<p>{escape(alt)}</p>"
    data = base64.b64encode((c.out_dir / name).read_bytes()).decode("ascii")
    return f'<figure><img src="data:image/png;base64,{data}" alt="{escape(alt)}"></figure>'


def _block(kind: str, lines: list[str], c: Content, links: Mapping[str, str]) -> list[str]:
    """The HTML of consecutive lines of one kind."""
    if kind == "heading":
        return [_heading(line, links) for line in lines]
    if kind == "image":
        return [_figure(line, c) for line in lines]
    if kind == "item":
        items = [f"<li>{_inline(line[2:], links)}</li>" for line in lines]
        return ["<ul>", *items, "</ul>"]
    cells = _table_cells(lines) if kind == "table" else None
    if cells is not None:
        header, *rows = [[_inline(cell, links) for cell in row] for row in cells]
        return [_table(header, rows)]
    return [f"<p>{_inline(' '.join(lines), links)}</p>"]


def _body(text: str, c: Content, links: Mapping[str, str]) -> list[str]:
    out: list[str] = []
    for kind, group in groupby(text.splitlines(), key=_kind):
        if kind != "blank":
            out += _block(kind, list(group), c, links)
    return out


# --------------------------------------------------------------------------------------------
# Every job


def _jobs_section(c: Content) -> list[str]:
    """Every job counted, with a link to its directory, its status and its error."""
    grid = grid_of(c)
    rows = [
        [
            f'<a href="{_href(r.path, c.out_dir, directory=True)}">{escape(r.job)}</a>',
            escape(grid.name(r.group, r.task)),
            "–" if r.replicate is None else str(r.replicate),
            r.status,
            escape(r.error or "") + _error_link(r, c.out_dir, " " if r.error else ""),
        ]
        for r in sorted(c.runs, key=lambda r: (r.group, r.task, *run_order(r)))
    ]
    return [
        "<h2>Jobs</h2>",
        "<p>Every job counted, with a link to its directory (relative to this page) and, if it "
        f"failed, the last line of its {ERROR_FILE} and a link to it.</p>",
        _table(["job directory", grid.same, "replicate", "status", "error"], rows),
    ]


def render_html(c: Content, markdown_text: str) -> str:
    """The page of a report: ``markdown_text`` (its report.md) in HTML, then every job."""
    links = _job_links(c)
    lines = markdown_text.splitlines()
    title = next((line[2:] for line in lines if line.startswith("# ")), "Sweep report")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_POLICY}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title>",
        f"<style>\n{_STYLE}</style>",
        "</head>",
        "<body>",
        "<main>",
        *_body(markdown_text, c, links),
        *_jobs_section(c),
        "</main>",
        "</body>",
        "</html>",
    ]
    return "\n".join(parts) + "\n"
