"""The MLA decode tests' helpers live in _mla_formats.py (this directory is put on sys.path)."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
