"""LangGraph's own store tests against ``MemwardenStore`` on PostgreSQL
(the other legs: ``test_langgraph_conformance.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .test_langgraph_conformance import suites_pass_but_for_the_listed_differences


@pytest.mark.timeout(900)
def test_langgraphs_store_suites_pass_on_postgresql(tmp_path: Path) -> None:
    suites_pass_but_for_the_listed_differences(tmp_path, ["postgres"])
