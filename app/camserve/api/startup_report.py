"""The plain start-up report for people, printed once the models have loaded and the server
answers on its port (the JSON logs on stderr say the same for machines): where the page is, what
is served, how to fix what is not, and how to serve on another port."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["another_port_hint", "other_port", "page_url", "startup_report"]

ANY_INTERFACE = {"0.0.0.0", "::", ""}
EXAMPLE_PORTS = (9000, 9001)


def page_url(host: str, port: int) -> str:
    """The URL a browser on this machine opens: a wildcard interface is reached as localhost."""
    shown = "localhost" if host in ANY_INTERFACE else host
    if ":" in shown:  # an IPv6 address
        shown = f"[{shown}]"
    return f"http://{shown}:{port}/"


def other_port(port: int) -> int:
    """An example port that is not ``port``."""
    return next(example for example in EXAMPLE_PORTS if example != port)


def another_port_hint(port: int) -> str:
    """How to serve on another port than ``port``: the setting, with ``make serve`` or the
    command's flag."""
    other = other_port(port)
    return f"  another port: CAMSERVE_PORT={other} make serve (or camserve serve --port {other})"


def startup_report(
    url: str,
    served: Sequence[str],
    default: str | None,
    failures: Mapping[str, str],
    port: int,
    *,
    port_chosen: bool = False,
    models_from: str | None = None,
) -> str:
    """A few lines: the page and API docs, the served models (the default marked), each model
    that failed with its message, which ends with the fix, and how to choose the port, unless
    it was chosen (``port_chosen``: a flag or the environment named it); ``models_from`` says
    where the manifests were read."""
    names = [f"{name} (default)" if name == default else name for name in served]
    lines = [
        f"camserve is ready: open {url} (API docs: {url}docs)",
        f"  serving: {', '.join(names) if names else 'no model'}",
    ]
    if models_from is not None:
        lines.append(f"  models from: {models_from}")
    lines += [f"  not served: {name}: {reason}" for name, reason in failures.items()]
    if not port_chosen:
        lines.append(another_port_hint(port))
    return "\n".join(lines)
