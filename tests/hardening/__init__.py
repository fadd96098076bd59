"""Helpers of the hardening suites (fuzz, concurrency, faults, security)."""
