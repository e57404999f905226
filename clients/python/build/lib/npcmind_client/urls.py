"""Base URLs checked when a client is made: without a scheme, an HTTP client fails only at the first call."""

from __future__ import annotations


def http_url(url: str, what: str, example: str) -> str:
    """A base URL without its trailing slash, or a ValueError that shows the form: without a scheme, the
    HTTP client fails only at the first call, with 'unsupported protocol'."""
    if not url.strip().startswith(("http://", "https://")):
        raise ValueError(f"{what} must start with http:// or https://, as in {example}, not {url!r}")
    return url.strip().rstrip("/")
