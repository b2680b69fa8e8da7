#!/usr/bin/env bash
# Every benchmark, --quick, on an earlier commit and on the working tree,
# alternating (before, after, before, ...) so both see the same machine;
# then a table of the medians of each side.
#
#   scripts/bench/before_after.sh REV [ROUNDS] [OUT]
#
# REV is checked out in a worktree with a venv of its own (kept in OUT for
# the next run); ROUNDS defaults to 3; OUT to bench-results/before-after.
set -euo pipefail
cd "$(dirname "$0")/../.."
rev="${1:?usage: before_after.sh REV [ROUNDS] [OUT]}"
rounds="${2:-3}"
out="${3:-bench-results/before-after}"
benches=(append query revoke http rebuild)
mkdir -p "$out/before" "$out/after"
if [ ! -d "$out/tree" ]; then
    git worktree add --detach "$out/tree" "$rev" >/dev/null
fi
if [ ! -x "$out/tree/.venv/bin/python" ]; then
    python3.11 -m venv "$out/tree/.venv"
    "$out/tree/.venv/bin/python" -m pip install --quiet -e "$out/tree[bench]"
fi
for round in $(seq "$rounds"); do
    for bench in "${benches[@]}"; do
        (cd "$out/tree" && .venv/bin/python "scripts/bench/$bench.py" --quick --json "$OLDPWD/$out/before/$bench-$round.json" >/dev/null)
        .venv/bin/python "scripts/bench/$bench.py" --quick --json "$out/after/$bench-$round.json" >/dev/null
        echo "round $round: $bench done" >&2
    done
done
.venv/bin/python scripts/bench/report.py --compare "$out/before" "$out/after"
