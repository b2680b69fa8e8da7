"""What goes wrong with a read model: it is damaged, and rebuilt from the log."""

from __future__ import annotations


class ProjectionDamaged(ValueError):
    """A read model holds what no event could have put there (a file edited
    by hand). The log is the truth: ``memwarden rebuild`` replays it."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"projection damaged: {where}: {problem} (run 'memwarden rebuild')")
        self.where = where
        self.problem = problem
