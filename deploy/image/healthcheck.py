"""The image's HEALTHCHECK: exit 0 when this container's node answers ``GET /health`` with 200.

Standard library only (the slim image has no curl); the port is ``AVM_PORT`` (default 8080)."""

import os
import sys
import urllib.request

url = f"http://127.0.0.1:{os.environ.get('AVM_PORT', '8080')}/health"
try:
    with urllib.request.urlopen(url, timeout=3) as response:  # noqa: S310 (a fixed loopback URL)
        sys.exit(0 if response.status == 200 else 1)
except OSError as error:
    print(f"unhealthy: {error}", file=sys.stderr)
    sys.exit(1)
