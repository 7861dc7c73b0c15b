"""The plain start-up report for people, printed once the models have loaded (the JSON logs on
stderr say the same for machines): where the page is, what is served, and how to fix what is
not."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["page_url", "startup_report"]

ANY_INTERFACE = {"0.0.0.0", "::", ""}


def page_url(host: str, port: int) -> str:
    """The URL a browser on this machine opens: a wildcard interface is reached as localhost."""
    shown = "localhost" if host in ANY_INTERFACE else host
    if ":" in shown:  # an IPv6 address
        shown = f"[{shown}]"
    return f"http://{shown}:{port}/"


def startup_report(
    url: str, served: Sequence[str], default: str | None, failures: Mapping[str, str]
) -> str:
    """A few lines: the page and API docs, the served models (the default marked), and each
    model that failed with its message, which ends with the fix."""
    names = [f"{name} (default)" if name == default else name for name in served]
    lines = [
        f"camserve is ready: open {url} (API docs: {url}docs)",
        f"  serving: {', '.join(names) if names else 'no model'}",
    ]
    lines += [f"  not served: {name}: {reason}" for name, reason in failures.items()]
    return "\n".join(lines)
