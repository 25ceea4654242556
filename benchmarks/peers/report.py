"""Run the peer families and write the report: a markdown table and a PNG chart per family.

    python -m benchmarks.peers [--family NAME ...] [--out DIR] [--quick]

Per kernel pair and shape: each output vs the float64 reference; ours vs AITER's (ULP-difference
histogram of the bf16 outputs, identical NaN/Inf positions, LSE difference); the emulator's counters per
unit of work, bytes, and perfmodel's modeled time. "ours" is empty where our kernel does not exist yet.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from . import families, metrics

SHORT = {"mfma": "MFMA", "valu": "VALU", "ds": "DS", "vmem": "VMEM", "salu": "SALU", "waitcnt": "waitcnt",
         "barrier": "barrier", "wave_instructions": "total"}


def run_family(f: families.Family) -> list[dict]:
    rows = []
    for c in f.cases:
        t0 = time.process_time()
        x = f.inputs(c)
        refs = f.reference(x, c)
        units = families.unit_count(f, c)
        for who, fn in (("AITER", f.aiter), *f.more_aiter, ("ours", f.ours)):
            r = fn(x, c)
            if r is None:
                rows.append({"case": c.label, "who": who, "missing": True})
                continue
            cnt = r.counters
            row = {"case": c.label, "who": who, "note": r.note, "counters": cnt,
                   "per_unit": metrics.per_unit(cnt, units),
                   "errors": {k: metrics.rel_err(r.out, v) for k, v in refs.items() if k != "lse"},
                   "model": metrics.modeled(cnt, f.arch), "hazard_sites": len(cnt.get("hazards", [])),
                   "out": r.out, "lse": r.lse}
            if "lse" in refs and r.lse is not None:
                row["lse_err"] = float((r.lse.double() - refs["lse"]).abs().max())
            if f.kv_tokens:
                tok = f.kv_tokens(c)
                row["bytes_per_token"] = cnt.get("vmem_load_bytes", 0) / tok
                row["lines_bytes_per_token"] = 64.0 * cnt.get("global_lines", 0) / tok
            rows.append(row)
        a, o = rows[-2 - len(f.more_aiter)], rows[-1]  # ours vs the first AITER kernel
        if not a.get("missing") and not o.get("missing"):
            o["vs_aiter"] = {"ulp": metrics.ulp_histogram(o["out"], a["out"]),
                             "same_nonfinite": metrics.same_nonfinite(o["out"], a["out"]),
                             "max_abs": float((o["out"].double() - a["out"].double()).abs().max()),
                             "max_ref": float(max(v.abs().max() for k, v in refs.items() if k != "lse"))}
            if a.get("lse") is not None and o.get("lse") is not None:
                o["vs_aiter"]["lse_diff"] = float((o["lse"].double() - a["lse"].double()).abs().max())
        rows[-1]["cpu_s"] = time.process_time() - t0
    return rows


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def markdown(f: families.Family, rows: list[dict]) -> str:
    ref_names = sorted({k for r in rows if not r.get("missing") for k in r["errors"]})
    head = ["shape", "kernel"] + [f"rel. err vs {n}" for n in ref_names] + [SHORT[k] for k in metrics.COUNTER_KEYS]
    head += ["load B", "store B", "LDS rd B", "LDS wr B", "64B lines"]
    if f.kv_tokens:
        head += ["load B/token", "lines B/token"]
    head += ["modeled µs", "bound", "hazard sites"]
    out = [f"### {f.title}", "", f"Counters and bytes per unit of work: {f.unit}. Modeled time: "
           f"`moonmath_common.perfmodel` of the whole launch (an op's launches summed; the model spreads waves over "
           "every CU, so small launches look faster than they can be), HBM bytes = 64 x distinct lines touched. "
           "Hazard sites: distinct sites the emulator's checker reports (warn mode) for AITER's code; ours run "
           "with the checker raising.", ""]
    out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        if r.get("missing"):
            out.append(f"| {r['case']} | {r['who']}: no kernel yet (NoKernelError) |" + " |" * (len(head) - 2))
            continue
        pu = r["per_unit"]
        named = r["note"] and (r["who"] == "ours" or f.more_aiter)  # several AITER rows: name their objects
        cells = [r["case"], f"{r['who']}" + (f" ({r['note']})" if named else "")]
        cells += [f"{r['errors'][n]:.2e}" if n in r["errors"] else "" for n in ref_names]
        cells += [_fmt(pu[k]) for k in metrics.COUNTER_KEYS]
        cells += [_fmt(pu["vmem_load_bytes"]), _fmt(pu["vmem_store_bytes"]), _fmt(pu["lds_read_bytes"]),
                  _fmt(pu["lds_write_bytes"]), _fmt(pu["global_lines"])]
        if f.kv_tokens:
            cells += [_fmt(r["bytes_per_token"]), _fmt(r["lines_bytes_per_token"])]
        m = r["model"]
        cells += [f"{m['modeled_s'] * 1e6:.2f}", m["bound"], str(r["hazard_sites"])]
        out.append("| " + " | ".join(cells) + " |")
    cmp_rows = [r for r in rows if r.get("vs_aiter")]
    if cmp_rows:
        out += ["", "Ours vs AITER on the same inputs (bf16 outputs):", "",
                "| shape | ULP difference histogram (bf16 steps; entries near 0 span many) | max abs diff "
                "(max abs output) | same NaN/Inf positions | LSE max diff |", "|---|---|---|---|---|"]
        for r in cmp_rows:
            v = r["vs_aiter"]
            hist = ", ".join(f"{k}: {n}" for k, n in v["ulp"].items())
            lse = f"{v['lse_diff']:.2e}" if "lse_diff" in v else "n/a"
            out.append(f"| {r['case']} | {hist} | {v['max_abs']:.2e} ({v['max_ref']:.2e}) | "
                       f"{'yes' if v['same_nonfinite'] else 'NO'} | {lse} |")
    lse_rows = [r for r in rows if "lse_err" in r]
    if lse_rows:
        out += ["", "LSE (natural log) max abs difference vs float64: " +
                "; ".join(f"{r['case']} {r['who']} {r['lse_err']:.1e}" for r in lse_rows)]
    for n in f.notes:
        out.append(f"- {n}")
    return "\n".join(out) + "\n"


def chart(f: families.Family, rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [k for k in metrics.COUNTER_KEYS]
    have = [r for r in rows if not r.get("missing")]
    cases = list(dict.fromkeys(r["case"] for r in have))
    fig, axes = plt.subplots(1, len(cases), figsize=(4.2 * len(cases), 3.6), squeeze=False)
    for ax, case in zip(axes[0], cases):
        sel = [r for r in have if r["case"] == case]
        width = 0.8 / max(1, len(sel))
        for i, r in enumerate(sel):
            xs = [j + i * width for j in range(len(keys))]
            ax.bar(xs, [max(r["per_unit"][k], 1e-3) for k in keys], width, label=r["who"])
        ax.set_yscale("log")
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(keys))])
        ax.set_xticklabels([SHORT[k] for k in keys], rotation=60, fontsize=7)
        ax.set_title(case, fontsize=8)
        ax.legend(fontsize=7)
    fig.suptitle(f"{f.title}\nwave-instructions per {f.unit}", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.peers", description=__doc__.splitlines()[0])
    ap.add_argument("--family", action="append", choices=sorted(families.FAMILIES), help="default: all")
    ap.add_argument("--out", default="build/peers", help="directory for the markdown and PNG files")
    ap.add_argument("--quick", action="store_true", help="small shapes (CI smoke)")
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    report = ["# AITER peers on moonmath-emu", ""]
    t_all = time.process_time()
    for name in a.family or list(families.FAMILIES):
        f = families.FAMILIES[name](quick=a.quick)
        t0 = time.process_time()
        rows = run_family(f)
        md = markdown(f, rows) + f"\nCPU time of this family: {time.process_time() - t0:.1f} s\n"
        print(md, flush=True)
        (out / f"{name}.md").write_text(md)
        chart(f, rows, out / f"{name}.png")
        report += [md, f"![{name}]({name}.png)", ""]
    report.append(f"Total CPU time: {time.process_time() - t_all:.1f} s")
    (out / "report.md").write_text("\n".join(report) + "\n")
    print(f"wrote {out}/report.md and one .md/.png per family; total CPU {time.process_time() - t_all:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
