"""Prometheus figures shared between processes: ``board.MetricsBoard`` (cluster nodes, local workers)."""
