"""A small builder for self-contained HTML reports: headings, paragraphs, tables and images
(next to the page, referenced by name). Everything given as text is escaped."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path

STYLE = """body{font-family:sans-serif;margin:2em;max-width:1200px}
table{border-collapse:collapse;margin:1em 0} td,th{border:1px solid #999;padding:4px 10px;text-align:right}
td:first-child,th:first-child{text-align:left} th{background:#eee}
img{max-width:100%;border:1px solid #ccc;margin:1em 0} .note{color:#555}
summary{cursor:pointer;margin:.3em 0}"""


@dataclass
class Page:
    title: str
    parts: list[str] = field(default_factory=list)

    def heading(self, text: str, level: int = 2) -> "Page":
        self.parts.append(f"<h{level}>{html.escape(text)}</h{level}>")
        return self

    def para(self, text: str, note: bool = False) -> "Page":
        cls = ' class="note"' if note else ""
        self.parts.append(f"<p{cls}>{html.escape(text)}</p>")
        return self

    def table(self, header: list[str], rows: list[list[str]]) -> "Page":
        head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
        self.parts.append(f"<table><tr>{head}</tr>{body}</table>")
        return self

    def image(self, path: Path, alt: str) -> "Page":
        self.parts.append(f'<img src="{html.escape(path.name)}" alt="{html.escape(alt)}">')
        return self

    def details(self, summary: str, inner: "Page") -> "Page":
        """`inner`'s parts folded under a one-line summary the reader opens (e.g. per-scenario figures)."""
        self.parts.append(f"<details><summary>{html.escape(summary)}</summary>\n" + "\n".join(inner.parts)
                          + "\n</details>")
        return self

    def render(self) -> str:
        t = html.escape(self.title)
        return (f'<!doctype html>\n<html><head><meta charset="utf-8"><title>{t}</title>'
                f"<style>{STYLE}</style></head><body>\n<h1>{t}</h1>\n" + "\n".join(self.parts) + "\n</body></html>\n")

    def write(self, path: Path) -> Path:
        path.write_text(self.render())
        return path
