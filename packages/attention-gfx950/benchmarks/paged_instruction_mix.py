"""Dynamic instruction counts on the emulator (gfx950): forward_varlen vs forward_paged over the same keys, one
64-row tile against 512 keys, d128, unsplit, page sizes 8/16/64. Prints the counters that differ and the common
perfmodel's modeled time (issue rates only: HBM bytes are not given, so no memory term).

    MOONMATH_EMU_ARCH=gfx950 python packages/attention-gfx950/benchmarks/paged_instruction_mix.py
"""
import os
import sys
from pathlib import Path

os.environ.setdefault("MOONMATH_EMU_ARCH", "gfx950")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from test_attention_gfx950_paged import paged_case  # noqa: E402

import moonmath_attention_gfx950 as att  # noqa: E402
from moonmath_attention_gfx950 import kernel  # noqa: E402
from moonmath_common import perfmodel, use_backend  # noqa: E402

with use_backend("emu"):
    for ps in (8, 16, 64):
        c = paged_case([64], [512], ps, hq=1, hk=1, dqk=128, dv=128, seed=1)
        with kernel.planner_options(num_cus=1):
            att.forward_varlen(c["q"], c["k"], c["v"], c["cu_q"], c["cu_k"], 64, 512)
            cv = kernel.KERNELS.last_counters
            att.forward_paged(c["q"], c["kc"], c["vc"], c["cu_q"], c["lens"], kv_indptr=c["indptr"],
                              kv_page_indices=c["indices"])
            cp = kernel.KERNELS.last_counters
        diff = {k: (cv[k], cp[k]) for k in cv if isinstance(cv[k], int) and cv[k] != cp.get(k)}
        mv, mp = (perfmodel.model(x, "gfx950")["modeled_s"] * 1e6 for x in (cv, cp))
        print(f"page_size {ps}: (varlen, paged) {diff}; modeled MI355X compute us (issue-rate model, no HBM term): "
              f"{mv:.3f} -> {mp:.3f}")
