"""memwarden.client: the HTTP API as ``memwarden.engine.Memories``, for a
program that runs beside a ``memwarden serve`` rather than in its process.

    from memwarden.client import Client

    with Client("http://127.0.0.1:8077", key) as mw:
        saved = mw.save(memory_id="meeting", kind="external_fact", summary="회의 시간",
                        content="목요일 오후 3시", source_url="https://calendar.example/e/1",
                        scope={"tenant": "demo"})
        view = mw.get("meeting")      # read-your-writes: waits for the save's position

An answer is believed only as the answer to what was asked (else
``UntrustedAnswer``), and a redirect is followed only within the base
URL's origin.
"""

from __future__ import annotations

from ._checks import UntrustedAnswer
from ._client import AsyncClient, Client

__all__ = ["AsyncClient", "Client", "UntrustedAnswer"]
