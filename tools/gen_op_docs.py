"""Generate each op page's signature and argument table from the op's docstring, so they cannot drift.

An op page opts in with one block per documented callable

    <!-- generated from the docstring of <module>.<name>[.<method>]: python tools/gen_op_docs.py -->
    ...
    <!-- end generated -->

(``moonmath_amd.forward``, ``moonmath_mha_gfx942.forward``, ``moonmath_amd.VarlenPlan.plan``, ...), which this
tool rewrites: the signature (inspect.signature, ``*`` before keyword-only arguments, wrapped at 100 columns),
a table of the docstring's ``Args:`` section (Google style: ``name: text``, continuation lines indented;
``a, b: text`` documents both; ``host_cu_seqlens_q/_k`` documents host_cu_seqlens_q and host_cu_seqlens_k), the
``Returns:`` text and a table of the ``Raises:`` section (``Error: when``).

    python tools/gen_op_docs.py           # rewrite the blocks in docs/ops/*.md
    python tools/gen_op_docs.py --check   # exit 1 if a block is stale (the docs test runs this)
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs" / "ops"
BLOCK = re.compile(r"(<!-- generated from the docstring of ([\w.]+): python tools/gen_op_docs.py -->\n)"
                   r"(.*?)(<!-- end generated -->)", re.S)
WIDTH = 100
ALIASES = {"moonmath_amd": "ma"}     # how the pages spell the metapackage (import moonmath_amd as ma)


def resolve(target: str):
    """(callable, shown name, is_method) of a dotted target: a module path, then attributes."""
    parts = target.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        mod = ".".join(parts[:i])
        break
    else:
        raise ValueError(f"{target}: no importable module prefix")
    shown = ALIASES.get(mod, mod)
    is_method = False
    for name in parts[i:]:
        cls, is_method = obj, inspect.isclass(obj)
        obj = getattr(obj, name)
        if not is_method:
            shown += "." + name
        elif inspect.signature(obj).return_annotation in (cls, cls.__name__):
            shown += f"().{name}"                   # a builder: plan = ma.VarlenPlan().plan(...)
        else:                                       # on an instance named after the class: plan.run(...)
            shown = re.findall(r"[A-Z][a-z]*", cls.__name__)[-1].lower() + "." + name
    return obj, shown, is_method


def _section(doc: str, title: str) -> list[str]:
    """The lines of the docstring's `title:` section (up to the first line indented less than its entries)."""
    lines = inspect.cleandoc(doc).splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == f"{title}:") + 1
    except StopIteration:
        return []
    base = len(lines[start - 1]) - len(lines[start - 1].lstrip())
    out: list[str] = []
    for line in lines[start:]:
        if line.strip() and len(line) - len(line.lstrip()) <= base:
            break
        out.append(line)
    while out and not out[-1].strip():
        out.pop()
    return out


def _entries(lines: list[str]) -> list[tuple[str, str]]:
    """(names, text) of `name: text` entries, continuation lines (indented deeper) joined; blank lines kept out."""
    rows: list[tuple[str, str]] = []
    indent = None
    for line in lines:
        if not line.strip():
            continue
        ind = len(line) - len(line.lstrip())
        if indent is None:
            indent = ind
        m = re.match(r"\s*([\w, /]+?):\s+(.*)", line) if ind == indent else None
        if m:
            rows.append((m.group(1), m.group(2)))
        elif rows:
            rows[-1] = (rows[-1][0], rows[-1][1] + " " + line.strip())
    return rows


def args_section(doc: str, params: list[str] | None = None) -> list[tuple[str, str]]:
    """(names, text) rows of the docstring's Args: section. "a: text. b: text" on one line is split into rows
    where a later sentence starts with "name:" and (given params) every name is a parameter."""
    out: list[tuple[str, str]] = []
    for names, text in _entries(_section(doc, "Args")):
        pieces = re.split(r"(?<=[.)])\s+(?=(?:\w+(?:, \w+)*): )", text)
        cur_names, cur = names, pieces[0]
        for p in pieces[1:]:
            n, t = p.split(": ", 1)
            if params is None or all(x.strip() in params for x in n.split(",")):
                out.append((cur_names, cur))
                cur_names, cur = n, t
            else:
                cur += " " + p
        out.append((cur_names, cur))
    return out


def arg_names(names: str) -> list[str]:
    """The parameters an Args row documents: "a, b" -> a, b; "host_cu_seqlens_q/_k" -> host_cu_seqlens_q, ..._k."""
    out = []
    for n in (x.strip() for x in names.split(",")):
        if "/" in n:
            first, *alts = n.split("/")
            stem = first[:first.rfind("_")] if alts and alts[0].startswith("_") else ""
            out += [first] + [stem + a if a.startswith("_") else a for a in alts]
        else:
            out.append(n)
    return out


def documented_args(fn) -> list[str]:
    return [n for names, _ in args_section(fn.__doc__ or "", signature_params(fn)) for n in arg_names(names)]


def signature_params(fn) -> list[str]:
    return [p for p in inspect.signature(fn).parameters if p != "self"]


def _signature(fn, shown: str, is_method: bool) -> str:
    sig = inspect.signature(fn)
    params, seen_kwonly = [], False
    plist = [p for p in sig.parameters.values() if not (is_method and p.name == "self")]
    for p in plist:
        if p.kind is p.KEYWORD_ONLY and not seen_kwonly:
            params.append("*")
            seen_kwonly = True
        if p.kind is p.VAR_POSITIONAL:
            seen_kwonly = True
        params.append(p.name + (f"={p.default!r}" if p.default is not p.empty else ""))
    ret = sig.return_annotation
    ret = "" if ret is inspect.Signature.empty else f" -> {ret if isinstance(ret, str) else ret.__name__}"
    head = f"{shown}("
    lines, cur = [], head
    for i, p in enumerate(params):
        piece = p + (", " if i < len(params) - 1 else ")" + ret)
        if len(cur) + len(piece.rstrip()) > WIDTH and cur.strip() != head.strip():
            lines.append(cur.rstrip())
            cur = " " * len(head)
        cur += piece
    if not params:
        cur += ")" + ret
    lines.append(cur)
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render(target: str) -> str:
    fn, shown, is_method = resolve(target)
    doc = fn.__doc__ or ""
    out = ["```python", _signature(fn, shown, is_method), "```", ""]
    rows = args_section(doc, signature_params(fn))
    if rows:
        out += ["| argument | meaning |", "|---|---|"]
        for names, text in rows:
            out.append(f"| {', '.join(f'`{n.strip()}`' for n in names.split(','))} | {_cell(text)} |")
        out.append("")
    returns: list[str] = []          # a paragraph, then "- item" lines as a markdown list
    for line in (x.strip() for x in _section(doc, "Returns") if x.strip()):
        if line.startswith("- ") or not returns:
            returns.append(line)
        else:
            returns[-1] += " " + line
    if returns:
        out += [f"**Returns** {returns[0]}", ""] + ([*returns[1:], ""] if returns[1:] else [])
    raises = _entries(_section(doc, "Raises"))
    if raises:
        out += ["| raises | when |", "|---|---|"]
        for names, text in raises:
            out.append(f"| {', '.join(f'`{n.strip()}`' for n in names.split(','))} | {_cell(text)} |")
        out.append("")
    return "\n".join(out)


def blocks(text: str) -> list[re.Match]:
    return list(BLOCK.finditer(text))


def regenerate(text: str) -> str:
    return BLOCK.sub(lambda m: m.group(1) + render(m.group(2)) + m.group(4), text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Generate op pages' signatures and argument tables from docstrings.")
    ap.add_argument("--check", action="store_true", help="report stale blocks and exit 1 instead of rewriting")
    a = ap.parse_args(argv)
    stale = []
    for page in sorted(DOCS.glob("*.md")):
        text = page.read_text()
        new = regenerate(text)
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
