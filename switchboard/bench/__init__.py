"""Benchmarks behind ``switchboard bench``."""
