"""Benchmarks: they print figures and write results; they are not pass/fail tests."""
