"""Moving a store to another backend: ``memwarden migrate --to URL``."""

from __future__ import annotations

from typing import Any

from memwarden.events import json_storable, unstorable, unstorable_fields
from memwarden.projections import Access, UnknownBackend

from ._core import Core
from ._errors import InvalidInput
from ._rights import Principal, operation

CHUNK = 5000
# memories a refused migration names in its answer (the count says the rest)
UNCARRIED_SHOWN = 50


@operation("operate")
def migrate(core: Core, to: str, *, caller: Principal) -> dict[str, Any]:
    """Copy the log (every seq and hash as it is), the texts, the API
    keys and the server's secrets (so a consistency token a client holds
    still reads) into the empty store ``to`` names, fold the view there as the
    events go in, and check it: the chain's head is the same, so a head
    kept before the move still verifies against the target. One
    transaction on the target: a failure leaves it empty."""
    try:
        target = Core(to, clock=core.clock)
    except UnknownBackend as exc:
        raise InvalidInput("to", exc.problem) from None
    try:
        held = _held(target)
        if held:
            raise InvalidInput("to", f"{target.path} already holds {held}: give an empty store")
        uncarried = _uncarried(core)
        if uncarried:
            shown = "; ".join(uncarried[:UNCARRIED_SHOWN])
            more = f" (and {len(uncarried) - UNCARRIED_SHOWN} more)" if len(uncarried) > UNCARRIED_SHOWN else ""
            raise InvalidInput(
                "to",
                f"{len(uncarried)} texts cannot be carried (no store keeps them; nothing was written): {shown}{more}",
            )
        copied = texts = 0
        with core.store.reading() as source, target.store.writing() as tx:
            head = core.log.head()
            for version in list(core.texts.all()):
                tx.texts.put(*version)
                texts += 1
            batch = []
            for record in core.log.read(until_seq=head.seq):
                batch.append(record)
                if len(batch) >= CHUNK:
                    copied += tx.append_recorded(batch)
                    batch = []
            copied += tx.append_recorded(batch)
            keys = _copy_keys(source, tx.view)
            for name, secret in source.side().server_secrets().items():
                tx.view.set_server_secret(name, secret, core.now())
        moved = target.log.head()
        check = target.store.check()
        return {
            "from": core.path,
            "to": target.path,
            "events": copied,
            "texts": texts,
            "keys": keys,
            "head": f"{moved.seq}:{moved.hash}",
            "same_head": (moved.seq, moved.hash) == (head.seq, head.hash),
            "projections_ok": check.ok,
        }
    finally:
        target.close()


def _uncarried(core: Core) -> list[str]:
    """Each memory (and event) holding a text no store keeps, named with
    the field, before a byte is written: a store made before the byte rule
    (``memwarden.events.check_storable``) may hold NUL where SQLite kept it."""
    found: list[str] = []
    for t in core.texts.all():
        for field, text in (("summary", t.summary), ("content", t.content)):
            if text is not None and (problem := unstorable(text)) is not None:
                found.append(f"{t.tenant}/{t.memory_id} v{t.version}: {field} {problem}")
    for record in core.log.read():
        if json_storable(record.payload_json):
            continue
        payload = record.payload
        named = f"{payload.get('tenant')}/{payload['memory_id']}" if "memory_id" in payload else "event"
        found.extend(f"{named} (seq {record.seq}): {field} {problem}" for field, problem in unstorable_fields(payload))
    return found


def _held(target: Core) -> str | None:
    """What a target store already holds (events, texts or API keys), if
    anything: a migration goes only into an empty store, so no key, text or
    event of another store can live on beside the migrated ones."""
    events = target.log.head().seq
    if events:
        return f"{events} events"
    try:
        with target.store.reading() as view:
            keys = len(view.side().keys())
            rows = bool(view.policies()) or bool(view.tenant_names(Access.system(), limit=1))
        texts = next(iter(target.texts.all()), None) is not None
    except Exception as exc:  # tables of another layout: not a store memwarden made empty
        return f"tables memwarden cannot read ({type(exc).__name__}: {str(exc)[:120]})"
    if keys:
        return f"{keys} API keys"
    if texts:
        return "texts"
    if rows:
        return "view rows that no event made"
    return None


def _copy_keys(source: Any, target: Any) -> int:
    """API keys as they are (hash, role, tenants, agent, times): a key works
    against the new store exactly as it did, and a revoked one stays revoked."""
    count = 0
    for listed in source.side().keys():
        (key,) = source.side().keys(listed.key_id)
        target.add_key(key.key_id, key.key_hash, key.role, list(key.tenants), key.agent, key.created_at)
        if key.revoked_at is not None:
            target.revoke_key(key.key_id, key.revoked_at)
        count += 1
    return count
