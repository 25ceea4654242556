"""Timing-model calibration and prediction against AITER's published hardware times (issue 16)."""
