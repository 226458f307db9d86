"""Observability: usage and billing, metrics, logs, traces and running turns (docs/observability.md)."""
