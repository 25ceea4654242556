"""`python -m moonmath_amd info`: what is installed, what it was built with, what can run here."""
from __future__ import annotations

import importlib
import importlib.metadata as md

OP_PACKAGES = {
    "moonmath-mha-gfx942": "moonmath_mha_gfx942",
    "moonmath-attention-gfx950": "moonmath_attention_gfx950",
    "moonmath-mla-decode": "moonmath_mla_decode",
    "moonmath-mxfp4-moe": "moonmath_mxfp4_moe",
}


def _version(dist: str) -> str:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return "not installed"


def collect() -> dict:
    from moonmath_common import backend
    from moonmath_common.arch import emulated_arch, live_arch
    from moonmath_common.kernels import KernelSet

    info: dict = {
        "versions": {d: _version(d) for d in ["moonmath-amd", "moonmath-common", *OP_PACKAGES, "moonmath-emu"]},
        "gpu": live_arch(),
        "emulator": backend.emulator_available(),
        "emulated_arch": emulated_arch(),
        "backend": backend.get_backend(),
        "packages": {},
    }
    for dist, mod in OP_PACKAGES.items():
        try:
            importlib.import_module(mod)
        except ImportError:
            continue
        ks = KernelSet(mod)
        kernels = []
        for arch in ks.archs_built():
            for path in ks.code_objects(arch):
                for k in ks.metadata(path).kernels.values():
                    kernels.append({"arch": arch, "code_object": path.stem, "kernel": k.name, "vgpr": k.vgpr,
                                    "agpr": k.agpr, "sgpr": k.sgpr, "lds": k.lds, "scratch": k.scratch})
        info["packages"][dist] = {"archs": ks.archs_built(), "build": ks.build_info(), "kernels": kernels}
    return info


def render(info: dict) -> str:
    lines = ["moonmath-amd", ""]
    lines += [f"  {d:28s} {v}" for d, v in info["versions"].items()]
    lines += ["", "backends:",
              f"  hip        AMD GPU: {info['gpu'] or 'none found'}",
              f"  emu        {'moonmath-emu installed' if info['emulator'] else 'not installed'}"
              f" (emulated arch {info['emulated_arch']}, MOONMATH_EMU_ARCH)",
              "  reference  plain torch, always available",
              f"  current:   {info['backend']} (MOONMATH_BACKEND)", ""]
    for dist, p in info["packages"].items():
        lines.append(f"{dist}: archs {', '.join(p['archs']) or 'none'}; compiler {p['build'].get('compiler', '?')}")
        for k in p["kernels"]:
            lines.append(f"  {k['arch']}  {k['code_object']}:{k['kernel']:40s} vgpr {k['vgpr']:3d}  agpr {k['agpr']:3d}"
                         f"  sgpr {k['sgpr']:3d}  lds {k['lds']:6d}  scratch {k['scratch']}")
    return "\n".join(lines)
