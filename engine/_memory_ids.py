"""The ids of the Memory API's entries: ``mem:AGENT:KEY``. The shape says
whose entry an id is, so every save checks it (``agent_named``): an id of
that shape is saved only in the scope of the agent it names, whichever
path writes it, and no key can take another agent's key name first."""

from __future__ import annotations

from ._errors import InvalidInput

# the only characters escaped in an id's parts: the separator and the escape
_ESCAPES = {"%": "%25", ":": "%3A"}
PREFIX = "mem:"


def _escape(part: str) -> str:
    return "".join(_ESCAPES.get(c, c) for c in part)


def _unescape(part: str) -> str:
    return part.replace("%3A", ":").replace("%25", "%")


def memory_id_of(agent: str, key: str) -> str:
    """The memory id of (agent, key) in a tenant: ``mem:AGENT:KEY`` with
    ``%`` and ``:`` escaped in both parts, so no two pairs share an id (agent
    ``a:b`` key ``c`` and agent ``a`` key ``b:c`` do not). Names without
    either character keep the id they always had."""
    return f"{PREFIX}{_escape(agent)}:{_escape(key)}"


def agent_named(memory_id: str) -> str | None:
    """The agent whose Memory API entry ``memory_id`` is, or None for an id
    of another shape; an id that starts with ``mem:`` and is not one is refused."""
    if not memory_id.startswith(PREFIX):
        return None
    parts = memory_id.split(":")
    if len(parts) != 3 or not parts[1] or not parts[2]:
        raise InvalidInput("memory_id", "ids starting with mem: are the Memory API's entries: mem:AGENT:KEY")
    return _unescape(parts[1])


def key_name_of(escaped: str) -> str:
    """A key's name as the agent gave it, from the part of its id after ``mem:AGENT:``."""
    return _unescape(escaped)


# what the HTTP face addresses below a memory's id (``/v1/memories/ID/explain``)
_ACTIONS = ("/explain", "/verify")


def check_addressable(memory_id: str) -> None:
    """An id ending in ``/explain`` or ``/verify`` is refused: over HTTP it
    would read as that action on the id before it (servers decode ``%2F``
    before routing), so the memory saved could never be read by its id."""
    if memory_id.endswith(_ACTIONS):
        raise InvalidInput("memory_id", "must not end in /explain or /verify: over HTTP those address an action")
