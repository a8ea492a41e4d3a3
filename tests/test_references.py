"""Citations stay honest (docs/references.md, "Citing"): every anchor the repository cites exists
in docs/references.md, every repository path that file names exists, no code comment cites an
issue number, and no code comment cites a seed's section without an anchor beside it.

Comments are found by small scanners (Python's tokenizer and docstrings; C, C++, TOML and shell
by their quoting rules), so a string that prints "seed 000 Fig. 10" in a report is not a comment;
each helper is checked against a tiny sample that must fail."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REFS = ROOT / "docs" / "references.md"
CITING_DIRS = ("src", "libiez", "sim", "iocop", "liopprof", "bench", "bench_app", "scripts", "scenarios",
               "tests", "docs")
CITING_TOP = ("README.md", "ARCHITECTURE.md")
TEXT_EXT = {".py", ".c", ".h", ".cpp", ".hpp", ".toml", ".sh", ".md", ".txt"}
CODE_EXT = {".py", ".c", ".h", ".cpp", ".hpp", ".toml", ".sh"}
SKIP_DIRS = {"__pycache__", ".hypothesis", "vectors", "build", ".venv"}
REPO_TOPS = ("src", "libiez", "sim", "iocop", "liopprof", "bench", "bench_app", "scripts", "scenarios",
             "tests", "docs", "cmake")
SELF = Path(__file__).resolve()

ANCHOR = r"[a-z0-9]+(?:-[a-z0-9]+)+"
CITE_LONG = re.compile(r"references\.md#([A-Za-z0-9-]+)")
CITE_SHORT = re.compile(r"\(references:\s*([^)]*)\)")
ISSUE = re.compile(r"\b[Ii]ssues? ?#?\d+")
SEED_LOCATOR = re.compile(r"\b[Ss]eed[ -]?00\d(?:'s)?,?\s*(?:§|Figs?\.|[Ee]q|Algorithm|Table|Section)")
HAS_ANCHOR = re.compile(r"references\.md#|\(references:")


def files(dirs: tuple[str, ...], exts: set[str]) -> Iterator[Path]:
    for d in dirs:
        for p in sorted((ROOT / d).rglob("*")):
            if p.is_file() and p.suffix in exts and not SKIP_DIRS & set(p.relative_to(ROOT).parts):
                yield p


def anchors(md: str) -> set[str]:
    """The explicit `<a id>` anchors, and the heading slugs GitHub makes (for links to a section)."""
    ids = set(re.findall(r'<a id="([^"]+)"', md))
    for h in re.findall(r"^#+ (.+)$", md, re.M):
        ids.add(re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-"))
    return ids


def cited_anchors(text: str) -> Iterator[str]:
    """Anchors cited as `references.md#a` or `(references: a, b)`; `#l-alloc-…` names a family."""
    yield from (a for a in CITE_LONG.findall(text) if not a.endswith("-"))
    for group in CITE_SHORT.findall(text):
        yield from (t for t in re.split(r"[\s,;*]+", group) if re.fullmatch(ANCHOR, t))


# --- comments of code files ---

def py_comments(src: str) -> Iterator[tuple[int, str]]:
    """Each run of `#` comment lines, and each docstring, of Python source. A docstring is taken
    to be a triple-quoted string after only comments at the top of the file or right after a
    `:` (a def or class header): parsing every file with `ast` would make this test slow."""
    yield from scan(src, PY_TOKENS, "#")
    for m in PY_TOKENS.finditer(src):
        if m.group().startswith(('"""', "\'\'\'")):
            before = re.sub(r"#[^\n]*", "", src[:m.start()]).rstrip()
            if not before or before.endswith(":"):
                yield src.count("\n", 0, m.start()) + 1, m.group()


C_TOKENS = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|/\*.*?(?:\*/|\Z)|//[^\n]*', re.S)
PY_TOKENS = re.compile(r'"""[\s\S]*?(?:"""|\Z)|\'\'\'[\s\S]*?(?:\'\'\'|\Z)|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|#[^\n]*')
HASH_TOKENS = re.compile(r'"""[\s\S]*?(?:"""|\Z)|\'\'\'[\s\S]*?(?:\'\'\'|\Z)|"(?:\\.|[^"\\\n])*"|\'[^\'\n]*\''
                         r"|(?:^|(?<=[ \t]))#[^\n]*", re.M)


def scan(src: str, tokens: re.Pattern[str], line_mark: str) -> Iterator[tuple[int, str]]:
    """(first line, text) of each comment `tokens` finds (string literals are matched, and so
    skipped); consecutive one-line comments (starting with `line_mark`) form one comment."""
    run: list[str] = []
    run_start = run_end = 0
    lineno, pos = 1, 0
    for m in tokens.finditer(src):
        text = m.group()
        if text[0] in "\"'":
            continue
        lineno, pos = lineno + src.count("\n", pos, m.start()), m.start()
        if text.startswith(line_mark):
            if run and lineno == run_end + 1:
                run.append(text)
                run_end = lineno
                continue
            if run:
                yield run_start, "\n".join(run)
            run, run_start, run_end = [text], lineno, lineno
        else:
            yield lineno, text
    if run:
        yield run_start, "\n".join(run)


def c_comments(src: str) -> Iterator[tuple[int, str]]:
    """Each `/* */` comment and each run of `//` lines of C or C++; strings and characters skipped."""
    return scan(src, C_TOKENS, "//")


def hash_comments(src: str) -> Iterator[tuple[int, str]]:
    """Each run of `#` comments of TOML or shell: a `#` outside quotes (TOML's triple quotes
    included) at the start of a line or after a blank."""
    return scan(src, HASH_TOKENS, "#")


@functools.cache
def comments(path: Path) -> tuple[tuple[int, str], ...]:
    src = path.read_text(errors="replace")
    if path.suffix == ".py":
        return tuple(py_comments(src))
    if path.suffix in {".c", ".h", ".cpp", ".hpp"}:
        return tuple(c_comments(src))
    return tuple(hash_comments(src))


def comment_violations(path: Path) -> Iterator[str]:
    """Issue numbers, and seed locators without an anchor in the same comment."""
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    for lineno, text in comments(path):
        yield from (f"{where}:{lineno}: cites {m.group()!r}" for m in ISSUE.finditer(text))
        seed = SEED_LOCATOR.search(text)
        if seed and not HAS_ANCHOR.search(text):
            yield f"{where}:{lineno}: {seed.group()!r} without a docs/references.md anchor"


# --- paths docs/references.md names ---

REPO_PATH = re.compile(r"(?<![\w/.-])((?:%s)/[\w./*-]*[\w*]|(?:README|ARCHITECTURE)\.md)" % "|".join(REPO_TOPS))
BARE_NAME = re.compile(r"`([\w.-]+\.(?:py|c|h|cpp|hpp|toml|sh))(?::[\d,-]+)?`")
LUSTRE_PATH = re.compile(r"\blustre/[\w./-]+")


def entries(md: str) -> Iterator[tuple[str, str]]:
    """(anchor, text) of each entry: the text from one `<a id>` to the next (the intro is "")."""
    parts = re.split(r'<a id="([^"]+)"></a>', md)
    yield "", parts[0]
    for k in range(1, len(parts), 2):
        yield parts[k], parts[k + 1]


def missing_paths(md: str, root: Path) -> Iterator[str]:
    """Repository paths `md` names that do not exist under `root`, and bare file names that name no
    full path before them in the same entry (nor a Lustre source file anywhere in `md`)."""
    lustre_names = {Path(p).name for p in LUSTRE_PATH.findall(md)}
    for anchor, text in entries(md):
        for m in REPO_PATH.finditer(text):
            rel = m.group(1).rstrip(".")
            ok = any(root.glob(rel)) if "*" in rel else (root / rel).exists()
            if not ok:
                yield f"#{anchor}: {rel} does not exist"
        for m in BARE_NAME.finditer(text):
            name = m.group(1)
            before = {Path(p).name for p in REPO_PATH.findall(text[:m.start()])}
            if name not in before and name not in lustre_names:
                yield f"#{anchor}: bare {name!r} follows no full path to it"


# --- the checks ---

def test_every_cited_anchor_exists():
    known = anchors(REFS.read_text())
    bad = []
    for p in [*files(CITING_DIRS, TEXT_EXT), *(ROOT / t for t in CITING_TOP)]:
        if p.resolve() == SELF:
            continue
        for lineno, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
            bad += [f"{p.relative_to(ROOT)}:{lineno}: #{a}" for a in cited_anchors(line) if a not in known]
    # a short form may break across comment lines: check those whole
    for p in files(CITING_DIRS, CODE_EXT):
        if p.resolve() != SELF:
            for lineno, text in comments(p):
                bad += [f"{p.relative_to(ROOT)}:{lineno}: #{a}" for a in cited_anchors(text) if a not in known]
    assert not sorted(set(bad)), "anchors cited but not in docs/references.md:\n" + "\n".join(sorted(set(bad)))


def test_every_path_references_names_exists():
    bad = list(missing_paths(REFS.read_text(), ROOT))
    assert not bad, "docs/references.md names paths that do not exist:\n" + "\n".join(bad)


def test_no_comment_cites_an_issue_or_a_bare_seed_section():
    bad = [v for p in files(CITING_DIRS[:-1], CODE_EXT) if p.resolve() != SELF for v in comment_violations(p)]
    assert not bad, "comments citing issues or seed sections without an anchor:\n" + "\n".join(bad)


def test_the_helpers_catch_violations(tmp_path):
    known = anchors('<a id="s000-gate"></a>\n## Seed 003: LIOPProf\n')
    assert {"s000-gate", "seed-003-liopprof"} <= known
    cited = list(cited_anchors("x (docs/references.md#s000-gate) /* (references: s000-gat,\n * l-abi-x) */"))
    assert cited == ["s000-gate", "s000-gat", "l-abi-x"]
    assert [a for a in cited if a not in known] == ["s000-gat", "l-abi-x"]

    py = tmp_path / "m.py"
    py.write_text('"""Docstring (issue #4)."""\nX = "seed 000 Fig. 10"  # fine\n\n# the gate (seed 000 §III-B2)\n\n'
                  '# cited: docs/references.md#s000-gate,\n# seed 000 §III-B2\n')
    assert [v.split(": ", 1)[1] for v in comment_violations(py)] == [
        "'seed 000 §' without a docs/references.md anchor", "cites 'issue #4'"]
    c = tmp_path / "m.c"
    c.write_text('const char *s = "issue 13 /* not a comment */";\n/* seed 004\'s Fig. 8 */\n'
                 '// (Issue 7)\n// more\nint x; /* (references: s004-fig8) seed 004 Fig. 8 */\n')
    assert [v.split(": ", 1)[1] for v in comment_violations(c)] == [
        '"seed 004\'s Fig." without a docs/references.md anchor', "cites 'Issue 7'"]
    toml = tmp_path / "m.toml"
    toml.write_text('title = "seed 001 Fig. 3 # not a comment"\nnotes = """\n# issue 9 in a string\n"""\n'
                    "# Seed 001 §4 cluster\nx = 1 # issue #2\n")
    assert [v.split(": ", 1)[1] for v in comment_violations(toml)] == [
        "cites 'issue #2'", "'Seed 001 §' without a docs/references.md anchor"]

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("")
    md = ('intro: `lustre/lod/lod_qos.c`\n<a id="x-one"></a>\n- **Used by:** `src/a.py` (`f`), `a.py`,'
          ' `lod_qos.c`, src/gone.py:3, `b.py`\n')
    assert list(missing_paths(md, tmp_path)) == ["#x-one: src/gone.py does not exist",
                                                 "#x-one: bare 'b.py' follows no full path to it"]
