#!/usr/bin/env python3
"""Check the links of every committed Markdown file: relative targets exist, anchors exist.

  docs-check.py              check README.md, docs/*.md and every other committed *.md
                             (git ls-files '*.md', nothing under target/); exit 1 if a
                             link is broken, printing each as `file:line: link: why`
  docs-check.py FILE...      check only these files
  docs-check.py --self-test  check the checker (slugs, link parsing) and exit

A relative link's target must exist (file or directory, relative to the file it is in;
`/path` is relative to the repository root). An anchor, `#anchor` in the same file or
`file.md#anchor`, must be the GitHub slug of a heading of that file (or an explicit
`<a id=…>`/`<a name=…>`): lowercase, punctuation dropped except `-` and `_`, each
space a `-`, the second heading with the same slug `-1`, the third `-2`, and so on.
External links (any scheme: http, https, mailto, …) are not fetched. Links inside
fenced code blocks and code spans are not links. Python 3 standard library only.
"""
import os
import re
import subprocess
import sys
import unicodedata
from urllib.parse import unquote

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
HTML_ANCHOR = re.compile(r"<a\s[^>]*?\b(?:id|name)\s*=\s*[\"']([^\"']+)[\"']", re.I)
REF_DEF = re.compile(r"^ {0,3}\[([^\]]+)\]:\s*(<[^>]*>|\S+)")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def slug(text):
    """GitHub's anchor for a heading's source text."""
    # What GitHub renders: code spans keep their text, links keep their text, images
    # their alt text, HTML tags go, emphasis markers go.
    spans = []

    def keep(m):
        spans.append(m.group(2).strip() if m.group(2).strip() else m.group(2))
        return f"\x00{len(spans) - 1}\x00"

    t = CODE_SPAN.sub(keep, text)
    t = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", t)
    t = re.sub(r"!?\[([^\]]*)\]\[[^\]]*\]", r"\1", t)
    t = re.sub(r"<[^>]+>", "", t)
    t = re.sub(r"(^|[^\w])_{1,2}(?=\S)(.+?)(?<=\S)_{1,2}(?=[^\w]|$)", r"\1\2", t)
    t = re.sub(r"\x00(\d+)\x00", lambda m: spans[int(m.group(1))], t)
    out = []
    for c in t.strip().lower():
        if c in " -_":
            out.append("-" if c == " " else c)
        elif unicodedata.category(c)[0] in "LNM":
            out.append(c)
    return "".join(out)


def scan(path):
    """(anchors, links): the file's anchors, and its links as (line, target)."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    anchors, seen, links = set(), {}, []
    refs = {}
    fence = None
    prev = ""

    def add_heading(text):
        s = slug(text)
        n = seen.get(s, 0)
        seen[s] = n + 1
        anchors.add(s if n == 0 else f"{s}-{n}")

    for no, line in enumerate(lines, 1):
        m = FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) \
                    and not line.strip()[len(m.group(1)):].strip():
                fence = None
            prev = ""
            continue
        if m:
            fence = m.group(1)
            prev = ""
            continue
        h = ATX.match(line)
        if h:
            add_heading(h.group(2) or "")
        elif SETEXT.match(line) and prev.strip() and not ATX.match(prev) \
                and not prev.lstrip().startswith(("-", "*", "+", ">", "|")):
            add_heading(prev.strip())
        for a in HTML_ANCHOR.findall(line):
            anchors.add(a)
        r = REF_DEF.match(line)
        if r:
            refs[r.group(1).lower()] = (no, r.group(2).strip("<>"))
        else:
            links.extend((no, t) for t in inline_links(line))
        prev = line
    links.extend(refs.values())
    return anchors, links


def inline_links(line):
    """The targets of `[text](target)` and `![alt](target)` outside code spans."""
    text = CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)
    out = []
    i = 0
    while True:
        j = text.find("](", i)
        if j < 0:
            return out
        k = j + 2
        depth = 1
        while k < len(text) and depth:
            if text[k] == "(":
                depth += 1
            elif text[k] == ")":
                depth -= 1
            k += 1
        inner = text[j + 2:k - 1].strip()
        if inner.startswith("<") and ">" in inner:
            target = inner[1:inner.index(">")]
        else:
            target = inner.split()[0] if inner.split() else ""
        out.append(target)
        i = k


def check(files):
    cache = {}

    def anchors_of(path):
        if path not in cache:
            cache[path] = scan(path)[0]
        return cache[path]

    broken = []
    for rel in files:
        path = os.path.abspath(rel) if os.path.isabs(rel) or os.path.exists(rel) \
            else os.path.join(ROOT, rel)
        if not os.path.isfile(path):
            broken.append(f"{rel}:0: {rel}: no such file")
            continue
        rel = os.path.relpath(path, ROOT)
        anchors, links = scan(path)
        cache[path] = anchors
        for no, target in links:
            why = problem(path, target, anchors_of)
            if why:
                broken.append(f"{rel}:{no}: {target}: {why}")
    return broken


def problem(path, target, anchors_of):
    if not target:
        return "empty link"
    if SCHEME.match(target) or target.startswith("//"):
        return None
    file_part, _, anchor = target.partition("#")
    file_part = unquote(file_part.split("?")[0])
    if file_part:
        base = ROOT if file_part.startswith("/") else os.path.dirname(path)
        dest = os.path.normpath(os.path.join(base, file_part.lstrip("/")))
        if not dest.startswith(ROOT + os.sep) and dest != ROOT:
            return "points outside the repository"
        if not os.path.exists(dest):
            return f"no such file or directory ({os.path.relpath(dest, ROOT)})"
    else:
        dest = path
    if not anchor:
        return None
    if not dest.endswith(".md") or os.path.isdir(dest):
        return None  # line anchors of source files and the like: not checked
    if unquote(anchor) not in anchors_of(dest):
        return f"no heading with anchor #{anchor} in {os.path.relpath(dest, ROOT)}"
    return None


def committed_markdown():
    out = subprocess.run(["git", "ls-files", "-z", "--", "*.md"], cwd=ROOT,
                         capture_output=True, check=True).stdout.decode()
    files = [f for f in out.split("\0") if f and not f.startswith("target/")]
    # The pages of docs/ also when they are new and not committed yet.
    docs = os.path.join(ROOT, "docs")
    if os.path.isdir(docs):
        files += [f"docs/{n}" for n in sorted(os.listdir(docs)) if n.endswith(".md")]
    files.append("README.md")
    return sorted(set(f for f in files if os.path.isfile(os.path.join(ROOT, f))))


def unlisted_pages():
    """Every page of docs/ is a chapter of the book (docs/SUMMARY.md), and every chapter
    exists."""
    docs = os.path.join(ROOT, "docs")
    summary = os.path.join(docs, "SUMMARY.md")
    if not os.path.isfile(summary):
        return ["docs/SUMMARY.md: missing (the book's table of contents)"]
    with open(summary, encoding="utf-8") as f:
        listed = set(re.findall(r"\]\(([^)#]+\.md)\)", f.read()))
    pages = {n for n in os.listdir(docs) if n.endswith(".md") and n != "SUMMARY.md"}
    out = [f"docs/{n}: not a chapter of docs/SUMMARY.md" for n in sorted(pages - listed)]
    out += [f"docs/SUMMARY.md: chapter {n} does not exist" for n in sorted(listed - pages)]
    return out


def self_test():
    cases = {
        "### The lab on the real control plane (`make demo-real`)":
            "the-lab-on-the-real-control-plane-make-demo-real",
        "## kind + TopoLVM end-to-end (`make e2e`)": "kind--topolvm-end-to-end-make-e2e",
        "## vtsnap-snapshot plan, list and validate": "vtsnap-snapshot-plan-list-and-validate",
        "### Refusals (exit 3, nothing changed)": "refusals-exit-3-nothing-changed",
        "### Measured: snapshots against mariadb-backup":
            "measured-snapshots-against-mariadb-backup",
        "### `deletionPolicy` (for the VolumeSnapshots vtsnap creates)":
            "deletionpolicy-for-the-volumesnapshots-vtsnap-creates",
        "## At 1 TB: a model, not a measurement": "at-1-tb-a-model-not-a-measurement",
        "### Node-local drivers (TopoLVM)": "node-local-drivers-topolvm",
        "## Install (Helm)": "install-helm",
        "## `snake_case` and _emphasis_ [a link](x.md)": "snake_case-and-emphasis-a-link",
        "## Café — naïve?": "café--naïve",
    }
    failed = 0
    for heading, want in cases.items():
        got = slug(ATX.match(heading).group(2))
        if got != want:
            print(f"self-test: slug({heading!r}) = {got!r}, want {want!r}", file=sys.stderr)
            failed += 1
    links = inline_links("see [a](b.md#c), `[not](a-link)`, ![i](img.png \"t\") and [x](<d e.md>)")
    if links != ["b.md#c", "img.png", "d e.md"]:
        print(f"self-test: inline_links gave {links}", file=sys.stderr)
        failed += 1
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "t.md")
        with open(p, "w", encoding="utf-8") as f:
            f.write("# T\n\n## Same\n\n## Same\n\n```\n## Not a heading [x](nowhere.md)\n```\n"
                    "[ok](#same-1) [bad](#same-2) [ref]\n\n[ref]: #t\n")
        anchors, links = scan(p)
        if anchors != {"t", "same", "same-1"}:
            print(f"self-test: anchors {sorted(anchors)}", file=sys.stderr)
            failed += 1
        if sorted(t for _, t in links) != ["#same-1", "#same-2", "#t"]:
            print(f"self-test: links {links}", file=sys.stderr)
            failed += 1
        bad = [t for _, t in links if problem(p, t, lambda q: scan(q)[0])]
        if bad != ["#same-2"]:
            print(f"self-test: broken {bad}, want ['#same-2']", file=sys.stderr)
            failed += 1
    if failed:
        print(f"docs-check self-test: {failed} failed", file=sys.stderr)
        return 1
    print(f"docs-check self-test: {len(cases) + 4} checks passed")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if any(a.startswith("-") for a in argv[1:]):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    files = argv[1:] or committed_markdown()
    broken = check(files) + ([] if argv[1:] else unlisted_pages())
    for b in broken:
        print(b)
    if broken:
        print(f"docs-check: {len(broken)} broken link(s) in {len(files)} files", file=sys.stderr)
        return 1
    print(f"docs-check: every link of {len(files)} Markdown files resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
