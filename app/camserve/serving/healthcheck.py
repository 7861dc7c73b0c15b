"""``python -m camserve.serving.healthcheck``: exit 0 when the local service is ready, 1 otherwise.

The container's HEALTHCHECK runs it, so slim images need no curl. It asks ``/readyz`` on
127.0.0.1 at ``$CAMSERVE_PORT`` (default 8000).
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request

__all__ = ["check", "main"]

TIMEOUT_S = 4.0


def check(port: int, timeout: float = TIMEOUT_S) -> tuple[bool, str]:
    """Whether ``/readyz`` on ``port`` answers 200, and a one-line reason."""
    url = f"http://127.0.0.1:{port}/readyz"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status == 200, f"{url}: {response.status}"
    except urllib.error.HTTPError as error:
        return False, f"{url}: {error.code} (not ready)"
    except (urllib.error.URLError, OSError) as error:
        return False, f"{url}: {getattr(error, 'reason', error)}"


def main() -> int:
    healthy, reason = check(int(os.environ.get("CAMSERVE_PORT", "8000")))
    print(reason, file=sys.stdout if healthy else sys.stderr)
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
