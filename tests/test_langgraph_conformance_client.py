"""LangGraph's own store tests against ``MemwardenStore`` through a live
server's ``Client`` and ``AsyncClient`` (the other legs:
``test_langgraph_conformance.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .test_langgraph_conformance import suites_pass_but_for_the_listed_differences


@pytest.mark.timeout(900)
def test_langgraphs_store_suites_pass_over_the_client(tmp_path: Path) -> None:
    suites_pass_but_for_the_listed_differences(tmp_path, ["client"])
