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
    from moonmath_common.arch import arch_choice, live_arch
    from moonmath_common.kernels import KernelSet

    gpu = live_arch()
    emulator = backend.emulator_available()
    name, source = backend.backend_choice()
    if source == "default":
        source = ("default: an AMD GPU is present" if name == "hip" else
                  "default: no AMD GPU, moonmath-emu installed" if name == "emu" else
                  "default: no AMD GPU and no moonmath-emu, so ops raise BackendUnavailableError")
    arch, arch_source = arch_choice()
    if name == "hip":
        target, target_source = gpu, "the live GPU (hip ignores set_arch / MOONMATH_EMU_ARCH)"
    else:
        target, target_source = arch, arch_source
    info: dict = {
        "versions": {d: _version(d) for d in ["moonmath-amd", "moonmath-common", *OP_PACKAGES, "moonmath-emu"]},
        "gpu": gpu,
        "emulator": emulator,
        "emulated_arch": arch,
        "emulated_arch_source": arch_source,
        "backend": name,
        "backend_source": source,
        "target_arch": target,
        "target_arch_source": target_source,
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
              f" (emulated arch {info['emulated_arch']}, from {info['emulated_arch_source']})",
              "  reference  plain torch, runs only when chosen (MOONMATH_BACKEND=reference)",
              f"  current:   {info['backend'] or 'none'} (from {info['backend_source']})",
              f"  arch:      {info['target_arch'] or 'none'} (from {info['target_arch_source']})", ""]
    for dist, p in info["packages"].items():
        lines.append(f"{dist}: archs {', '.join(p['archs']) or 'none'}; compiler {p['build'].get('compiler', '?')}")
        for k in p["kernels"]:
            lines.append(f"  {k['arch']}  {k['code_object']}:{k['kernel']:40s} vgpr {k['vgpr']:3d}  agpr {k['agpr']:3d}"
                         f"  sgpr {k['sgpr']:3d}  lds {k['lds']:6d}  scratch {k['scratch']}")
    return "\n".join(lines)
