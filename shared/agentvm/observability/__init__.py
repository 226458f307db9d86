"""What the operator sees: usage and billing (``usage``, ``pricing``, ``export``), the turns that are
queued, running or suspended (``running``), metrics, logs and traces (docs/usage.md,
docs/observability.md)."""
