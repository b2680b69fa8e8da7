"""memwarden.projections: read models built only from events."""

from __future__ import annotations

from ._errors import ProjectionDamaged
from ._fold import COLUMNS, SCOPE_COLUMNS, STATUSES, TERMINAL, TERMINAL_SQL, fold_memory, revoke_row
from ._rows import (
    SELECT_MEMORIES,
    VIEW_COLUMNS,
    Key,
    current_policies,
    fetch_row,
    fetch_rows,
    load_revocations,
    parent_refs,
    retired_version,
    row_dict,
    select_rows,
    select_rows_with_text,
    summaries,
)
from ._runner import CheckResult, Projection, Projector, default_projections
from ._selector import (
    BLOCKED_FETCH_SQL,
    blocking_revocation,
    revocation_blocks,
    revokes,
    selector_covers,
    selector_sql,
)
from ._stats import COUNTERS, StatsProjection, weekly
from ._text_index import purge_text_index, text_index_levels
from ._usable import RECHECK, UsableProjection, stored_texts

__all__ = [
    "BLOCKED_FETCH_SQL",
    "COLUMNS",
    "COUNTERS",
    "RECHECK",
    "SCOPE_COLUMNS",
    "SELECT_MEMORIES",
    "STATUSES",
    "TERMINAL",
    "TERMINAL_SQL",
    "VIEW_COLUMNS",
    "CheckResult",
    "Key",
    "Projection",
    "ProjectionDamaged",
    "Projector",
    "StatsProjection",
    "UsableProjection",
    "blocking_revocation",
    "current_policies",
    "default_projections",
    "fetch_row",
    "fetch_rows",
    "fold_memory",
    "load_revocations",
    "parent_refs",
    "purge_text_index",
    "retired_version",
    "revocation_blocks",
    "revoke_row",
    "revokes",
    "row_dict",
    "select_rows",
    "select_rows_with_text",
    "selector_covers",
    "selector_sql",
    "stored_texts",
    "summaries",
    "text_index_levels",
    "weekly",
]
