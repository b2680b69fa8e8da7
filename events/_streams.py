"""The stream of a memory, as the log names it: a plain function beside
the event models, so that the log's reads and the texts name a stream
without loading those models (and pydantic)."""

from __future__ import annotations


def memory_stream(tenant: str, memory_id: str) -> str:
    """The stream of a memory: its identity, (tenant, memory_id), as one name.

    Neither part may hold white space, so one space joins them without
    ambiguity, and no such name can equal a stream written before memories
    had a tenant in their identity (those were the bare memory id). The id
    comes first: new streams of time-ordered ids then land together in the
    stream index, where a tenant first would spread a batch over every
    tenant's part of it.
    """
    return f"{memory_id} {tenant}"
