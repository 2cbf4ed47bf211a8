"""The streaming chat-completions client: one connection pool, deadlines, request records,
Server-Sent Events parsed incrementally on raw bytes.
"""

from __future__ import annotations

from runners.client._client import (
    CHAT_PATH,
    COMPLETIONS_PATH,
    HEADERS,
    STREAMING,
    Deadlines,
    EndpointClient,
    RequestRecord,
    url_problem,
)

__all__ = [
    "CHAT_PATH",
    "COMPLETIONS_PATH",
    "HEADERS",
    "STREAMING",
    "Deadlines",
    "EndpointClient",
    "RequestRecord",
    "url_problem",
]
