"""Generate each op page's signature and argument table from the op's docstring, so they cannot drift.

An op page opts in with a block

    <!-- generated from the docstring of moonmath_amd.<name>: python tools/gen_op_docs.py -->
    ...
    <!-- end generated -->

which this tool rewrites: the signature (inspect.signature) and a table of the docstring's ``Args:``
section (Google style: ``name: text``, continuation lines indented; ``a, b: text`` documents both).

    python tools/gen_op_docs.py           # rewrite the blocks in docs/ops/*.md
    python tools/gen_op_docs.py --check   # exit 1 if a block is stale (the test runs this)
"""
from __future__ import annotations

import argparse
import inspect
import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs" / "ops"
BLOCK = re.compile(r"(<!-- generated from the docstring of moonmath_amd\.(\w+): python tools/gen_op_docs.py -->\n)"
                   r"(.*?)(<!-- end generated -->)", re.S)


def args_section(doc: str) -> list[tuple[str, str]]:
    """(names, text) rows of the docstring's Args: section."""
    lines = inspect.cleandoc(doc).splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "Args:") + 1
    except StopIteration:
        return []
    rows: list[tuple[str, str]] = []
    indent = None
    for line in lines[start:]:
        if not line.strip():
            if rows:
                continue
            break
        ind = len(line) - len(line.lstrip())
        if indent is None:
            indent = ind
        if ind < indent:
            break
        m = re.match(r"\s*([\w, ]+?):\s+(.*)", line) if ind == indent else None
        if m:
            rows.append((m.group(1), m.group(2)))
        elif rows:
            rows[-1] = (rows[-1][0], rows[-1][1] + " " + line.strip())
    # "a: text. b: text" on one line: split into rows where a later sentence starts with "name:"
    out: list[tuple[str, str]] = []
    for names, text in rows:
        parts = re.split(r"(?<=[.)])\s+(?=(?:\w+(?:, \w+)*): )", text)
        out.append((names, parts[0]))
        for p in parts[1:]:
            n, t = p.split(": ", 1)
            out.append((n, t))
    return out


def render(name: str) -> str:
    import moonmath_amd as ma

    fn = getattr(ma, name)
    sig = inspect.signature(fn)
    params = ", ".join(str(p).split(":")[0].strip() + (f"={p.default!r}" if p.default is not p.empty else "")
                       for p in sig.parameters.values())
    ret = sig.return_annotation
    ret = "" if ret is inspect.Signature.empty else f" -> {ret if isinstance(ret, str) else ret.__name__}"
    out = ["```python", f"ma.{name}({params}){ret}", "```", ""]
    rows = args_section(fn.__doc__ or "")
    if rows:
        out += ["| argument | meaning |", "|---|---|"]
        for names, text in rows:
            cell = text.replace("|", "\\|")
            out.append(f"| {', '.join(f'`{n.strip()}`' for n in names.split(','))} | {cell} |")
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Generate op pages' signatures and argument tables from docstrings.")
    ap.add_argument("--check", action="store_true", help="report stale blocks and exit 1 instead of rewriting")
    a = ap.parse_args(argv)
    stale = []
    for page in sorted(DOCS.glob("*.md")):
        text = page.read_text()
        new = BLOCK.sub(lambda m: m.group(1) + render(m.group(2)) + m.group(4), text)
        if new != text:
            stale.append(page.name)
            if not a.check:
                page.write_text(new)
    if a.check and stale:
        print("stale generated blocks (run python tools/gen_op_docs.py):", ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
