"""Timing-model calibration and prediction against AITER's published hardware times (run.py), and our
kernels modeled beside AITER's with every constant frozen (ours.py) (issue 16)."""
