"""Peer harness: AITER's shipped code objects run on moonmath-emu beside our kernels, same inputs.

Not part of any shipped package. Importable from the repository root (``python -m pytest`` and
``python -m benchmarks.peers`` put the working directory on sys.path):

    from benchmarks.peers.fmha_v3 import run_aiter_fmha

The pinned AITER wheel is fetched into a cache on first use (`wheel`); nothing of AITER is committed.
One module per AITER kernel family (`fmha_v3`, ...), each with its argument layout as a table of
`harness.Field`s. See docs/peers.md.
"""
