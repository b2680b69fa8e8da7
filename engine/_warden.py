"""The Warden: memwarden's Python API. Every face (CLI, HTTP, MCP) speaks to it."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from . import (
    _backup,
    _batch,
    _cache,
    _history,
    _memory_api,
    _migrate,
    _past,
    _policy_change,
    _reading,
    _records,
    _restore,
    _revoking,
    _saving,
    _verify,
)
from ._core import Core
from ._errors import InvalidInput
from ._memories import Acting
from ._rights import Principal, authorize, tenants_seen
from ._tokens import Positions, Tokens, store_tokens
from ._views import DueItem
from .recall import _reembed
from .recall import _search as _recall
from .sinks import _acks as _sink_acks
from .sinks import _ops as _sink_ops


class Warden(Core):
    """Decides whether a remembered fact may be used now.

    Open one per process (or per thread). What it owns is ``Core``: the
    store behind the ``--db`` URL (writes serialised by the store's write
    lock, reads of committed state), the clock, the TTL policy, the
    fetchers and the limits. Each operation below is a function of that
    state in the module named beside it, taking the Warden first; none
    reaches into another's private parts.
    """

    # saving (_saving), reading (_reading), the tool cache (_cache)
    save = _saving.save
    save_many = _batch.save_many
    get = _reading.get
    query = _reading.query
    search_ids = _reading.search_ids
    search = _recall.search  # semantic recall: the index proposes, the gate decides
    embedding_status = _reembed.embedding_status  # which embedder made the vectors, how many are stale
    reembed = _reembed.reembed  # the stale vectors made again by the configured embedder
    cache_put = _cache.cache_put
    cache_get = _cache.cache_get

    # what security staff do (_revoking)
    revoke = _revoking.revoke
    revocation = _revoking.revocation
    revocations = _revoking.revocations
    preview_revocation = _revoking.preview_revocation
    set_policy = _policy_change.set_policy
    change_policy = _policy_change.change_policy
    preview_policy = _policy_change.preview_policy
    policies = _policy_change.policies
    erase = _revoking.erase

    # the copies outside memwarden (sinks._ops): the outbox, each sink's read-back
    sinks_status = _sink_ops.sinks
    test_sink = _sink_ops.test_sink
    redeliver = _sink_ops.redeliver
    sink_notices = _sink_ops.sink_notices
    sink_readbacks = _sink_ops.sink_readbacks
    settle_sinks = _sink_ops.settle_sinks
    sink_leaks = _sink_ops.sink_leaks
    fill_cache = _sink_ops.fill_cache
    sink_ack = _sink_acks.sink_ack  # a sink's signed acknowledgement of a notice (ack = true)

    # re-verification (_verify) and the article's record format (_records)
    verify = _verify.verify
    verify_due = _verify.verify_due
    due = _verify.due
    import_records = _records.import_records

    # the Memory API pair (_memory_api): (tenant, agent, key) memories
    memory_save = _memory_api.save
    memory_load = _memory_api.load

    # for auditors (_past, _history): the past, the view's repair, the chain
    explain = _past.explain
    replay = _past.replay
    replay_stream = _past.replay_stream
    check_as_of = _past.check_as_of
    rebuild = _history.rebuild
    check_projections = _history.check_projections
    audit_verify = _history.audit_verify
    audit_head = _history.audit_head
    export = _history.export_log
    import_log = _history.import_log
    migrate = _migrate.migrate
    backup = _backup.backup
    reapply = _restore.reapply  # after a restore the engine did not make (pg_restore)
    reapply_erasures = _restore.reapply  # its name when it carried erasures alone

    def acting_as(self, caller: Principal) -> Acting:
        """This Warden as ``caller`` sees it: every operation with the caller
        named once (``memwarden.engine.Memories``, which the HTTP client
        implements too)."""
        return Acting(self, caller)

    @functools.cached_property
    def tokens(self) -> Tokens:
        """The store's consistency tokens (``_tokens``): its secret, read or made once."""
        return store_tokens(self)

    def positions(self, caller: Principal) -> Positions:
        """Log positions as ``caller`` is given them: seqs, or for a caller
        that may not read the log, tokens (``_tokens``)."""
        return Positions(caller, lambda: self.tokens)

    def scan_records(self, path: str | Path, *, caller: Principal) -> list[DueItem]:
        """What the article's scan prints for a file of records (nothing is written)."""
        authorize(caller, "read")
        return _records.scan_records(path, self.clock.now())

    # -- reporting ----------------------------------------------------------------------

    def stats(self, *, caller: Principal) -> list[dict[str, Any]]:
        """The counters per ISO week (saves, re-fetches after expiry, blocks by revocation, ...)."""
        authorize(caller, "review")
        with self.reading() as view:
            return [week.as_dict() for week in view.weekly()]

    def tenants(self, *, caller: Principal) -> list[str]:
        """The tenants the caller may see (``_rights.tenants_seen``): those
        holding memories it may read (up to 1,000), and an agent key's own."""
        authorize(caller, "read")
        with self.reading() as view:
            return tenants_seen(caller, view.tenant_names(caller.access))

    def tail(self, n: int = 20, *, caller: Principal) -> list[dict[str, Any]]:
        authorize(caller, "review")
        return [e.envelope() for e in self.log.tail(n)]

    def head_seq(self) -> int:
        """The seq of the last event in the log (0 for an empty log): a
        count of events, readable by anyone who may ask the server whether
        it is alive, so no caller is named."""
        return self.log.head().seq

    def events_after(self, after: int, limit: int, *, caller: Principal) -> list[dict[str, Any]]:
        """Up to ``limit`` events after seq ``after``, as envelopes (the feed
        downstream caches follow). An ``after`` beyond the head is refused at
        once: it is no cursor of this log (a store restored from an older
        backup, or a mistake), and a long-poll on it would wait its whole time."""
        authorize(caller, "review")
        events = [e.envelope() for e in self.log.read(after_seq=after, until_seq=after + limit)]
        if not events and after > (head := self.log.head().seq):  # asked only of an empty answer
            raise InvalidInput(
                "after", f"is beyond the log's head, seq {head}: no such position in this log; follow on from the head"
            )
        return events
