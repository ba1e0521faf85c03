"""Slow checks that leave the inner loop (make check, CI): see tests/conftest.py TIER_BY_PATH."""
