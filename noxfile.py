"""nox sessions for the moonmath-amd monorepo.

  nox -s demo              every op on the default backend vs its reference (the main job)
  nox -s tests             every package's tests and the integration tests in one environment (CI)
  nox -s package_tests-<p> one package alone: common + that package (+ the emulator)
  nox -s build-<p>         build the wheel of one package into dist/ and check its code objects
  nox -s isa-<p>           code-object budgets (registers, LDS, scratch) of one package
  nox -s lint | integration | docs | bench
  nox -s peers             AITER's shipped kernels beside ours on the emulator: tables + charts in build/peers
  nox -s timing            the timing model vs AITER's published times, then ours vs AITER (modeled; build/timing/)
"""
from __future__ import annotations

import os
from pathlib import Path

import nox

ROOT = Path(__file__).parent
nox.options.sessions = ["tests"]
nox.options.default_venv_backend = "venv"

# The CPU build of torch that these machines hold locally; a bare `torch` would pull a CUDA build.
TORCH = os.environ.get("MOONMATH_TORCH_SPEC", "torch==2.13.0")
PACKAGES = {
    "common": "common",
    "emu": "packages/emu",
    "mha-gfx942": "packages/mha-gfx942",
    "attention-gfx950": "packages/attention-gfx950",
    "mla-decode": "packages/mla-decode",
    "mxfp4-moe": "packages/mxfp4-moe",
    "moonmath-amd": "packages/moonmath-amd",
}
OP_PACKAGES = ["mha-gfx942", "attention-gfx950", "mla-decode", "mxfp4-moe"]
# ziglang: tests compile their own HIP test kernels (no ROCm needed);
# matplotlib: the peer report smoke test draws its chart
TEST_DEPS = ["pytest", "hypothesis", "numpy", "ziglang", "matplotlib"]


def _install_all(session: nox.Session) -> None:
    session.install(TORCH)
    session.install(*TEST_DEPS)
    session.install(*(f"./{p}" for p in PACKAGES.values()))


@nox.session
def demo(session: nox.Session) -> None:
    """Install everything, then run every op on the default backend against its reference."""
    _install_all(session)
    session.run("python", "-m", "moonmath_amd", "info")
    session.run("python", "-m", "moonmath_amd", "demo")


@nox.session
def tests(session: nox.Session) -> None:
    """All packages' tests plus the integration tests (what CI runs)."""
    _install_all(session)
    session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=15", *session.posargs)


@nox.session
@nox.parametrize("package", list(PACKAGES))
def package_tests(session: nox.Session, package: str) -> None:
    """One package installed alone with what it declares (common, and the emulator for kernel tests)."""
    session.install(TORCH)
    session.install(*TEST_DEPS)
    deps = {"common": ["common", "emu"], "emu": ["emu"]}.get(package, ["common", "emu", package])
    if package == "moonmath-amd":
        deps = list(PACKAGES)
    session.install(*(f"./{PACKAGES[d]}" for d in deps))
    tests_dir = Path(PACKAGES[package]) / "tests"
    session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tests_dir), *session.posargs)


@nox.session
@nox.parametrize("package", list(PACKAGES))
def build(session: nox.Session, package: str) -> None:
    """Build the wheel (and sdist) of one package into dist/ and list the code objects it holds."""
    session.install("build")
    session.run("python", "-m", "build", "--outdir", "dist", PACKAGES[package])
    session.run("python", str(ROOT / "tools" / "check_wheels.py"), "dist", package)


@nox.session
@nox.parametrize("package", OP_PACKAGES)
def isa(session: nox.Session, package: str) -> None:
    """Registers, LDS and scratch of each kernel against the budgets its package declares."""
    session.install(TORCH)
    session.install("pytest", "./common", f"./{PACKAGES[package]}")
    session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "isa or budget",
                str(Path(PACKAGES[package]) / "tests"))


@nox.session
def integration(session: nox.Session) -> None:
    """Cross-package tests: metapackage dispatch, install-alone checks."""
    _install_all(session)
    session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests_integration", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over the Python, clang-format (if present) over the C++/HIP."""
    session.install("ruff")
    session.run("ruff", "check", ".")
    import shutil

    cf = shutil.which("clang-format")
    if cf:
        files = [str(p) for p in ROOT.glob("**/*") if p.suffix in {".hip", ".hpp", ".cpp"} and "build" not in p.parts]
        session.run(cf, "--dry-run", "--Werror", "--style=file", *files, external=True)
    else:
        session.log("clang-format not found; C++/HIP formatting not checked")


@nox.session
def docs(session: nox.Session) -> None:
    """Build the docs site into build/site (mkdocs, config in mkdocs.yml; strict: broken links fail)."""
    session.install("mkdocs")
    session.run("mkdocs", "build", "--strict")


@nox.session
def bench(session: nox.Session) -> None:
    """Emulator throughput and the modeled kernel comparisons (no timing claims without hardware)."""
    _install_all(session)
    for script in sorted(ROOT.glob("packages/*/benchmarks/*.py")):
        session.run("python", str(script), *session.posargs)


@nox.session
def peers(session: nox.Session) -> None:
    """AITER's shipped kernels beside ours on the emulator (benchmarks/peers): markdown tables and PNG charts
    into build/peers. Fetches the pinned amd-aiter wheel into $MOONMATH_AITER_CACHE (default
    ~/.cache/moonmath/aiter) on first use. Extra arguments go to the runner (e.g. -- --family mla_gfx942)."""
    session.install(TORCH)
    session.install("numpy", "matplotlib")
    session.install(*(f"./{PACKAGES[p]}" for p in ("common", "emu", "mha-gfx942", "attention-gfx950", "mla-decode")))
    session.run("python", "-m", "benchmarks.peers", "--out", "build/peers", *session.posargs)


@nox.session
def timing(session: nox.Session) -> None:
    """The timing model against AITER's published hardware times: tables and figure in build/timing/.

    Runs AITER's FMHA v3 code objects (pinned amd-aiter wheel, fetched into $MOONMATH_AITER_CACHE) on
    the emulator under the timing model; calibrates one constant on the MI300X RTNE column and
    predicts the rest (benchmarks/timing/run.py); then models our gfx942 MHA and gfx950 attention
    forwards beside AITER v3 at the same shapes with every constant frozen (benchmarks/timing/ours.py:
    ours.md/json/png), and AITER's a16w8 MLA decode beside our mla_decode_a16w8 at the seed's MLA
    table (benchmarks/timing/mla.py: mla.md/json), and the gfx950 MLA formats beside AITER's a8w8 object at the
    GPU MODE amd-mixed-mla shapes (benchmarks/timing/mla_gfx950.py). A few minutes of CPU, plus building the three
    kernel packages.
    """
    session.install(TORCH)
    session.install("numpy", "matplotlib")
    session.install("./common", "./packages/emu", "./packages/mha-gfx942", "./packages/attention-gfx950",
                    "./packages/mla-decode")
    session.run("python", "-m", "benchmarks.timing.run", "--out", str(ROOT / "build" / "timing"), *session.posargs)
    session.run("python", "-m", "benchmarks.timing.ours", "--out", str(ROOT / "build" / "timing"))
    session.run("python", "-m", "benchmarks.timing.mla", "--out", str(ROOT / "build" / "timing"))
    session.run("python", "-m", "benchmarks.timing.mla_gfx950", "--out", str(ROOT / "build" / "timing"))
