"""Streaming a turn to its clients: the coalescing sink, frame numbering and replay, fan-out, resume."""
