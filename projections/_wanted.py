"""What a vector search may see and asks for: the scope it is confined and
filtered by before anything is compared (``_vector_parts``). Apart from the
index, which needs numpy: the engine names a search's scope at import."""

from __future__ import annotations

from dataclasses import dataclass

FILTERS = ("project", "permission", "user", "tool", "kind")


@dataclass(frozen=True)
class Wanted:
    """What a search may see and asks for: ``agent`` (a bound caller's own;
    None: every agent's part, and the memories of none) and the other scope
    fields (None: any)."""

    agent: str | None = None
    project: str | None = None
    permission: str | None = None
    user: str | None = None
    tool: str | None = None
    kind: str | None = None

    def filters(self) -> list[tuple[str, str]]:
        return [(f, v) for f in FILTERS if (v := getattr(self, f)) is not None]
