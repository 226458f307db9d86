"""What the operator sees: usage and billing (``usage``, ``pricing``, ``export``) and the turns
that are queued, running or suspended (``running``)."""
