"""What-if on every rank of a job at once: each rank replayed under the scenario, its
collectives joined with the other ranks'.

One rank's ``whatif`` keeps each collective's end where the trace put it (the others
arrive as recorded). Here every rank is replayed, and a collective is what it is on the
wire: it starts on every rank once the last rank reaches it and lasts its transfer time,
the shortest recorded duration of that collective over the ranks (the last rank to arrive
barely waits: its kernel is the transfer). Collectives are matched across ranks by kind
and order (``compare.arrival``); the ranks' clocks are taken as the traces give them
(``origin_ns``: one host's, or synchronized ones). The replays are solved in rounds: each
rank with the latest arrival of every collective so far as its floor, until no
collective's start moves; starts only move later, so the rounds end.

The job's step is its slowest rank's: a saving is the slowest rank's window time as
replayed less under the scenario.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from traceviz.analyses.replay.graph import NEVER, ReplayGraph, build, solve
from traceviz.analyses.summary.collectives import comm_rows
from traceviz.analyses.whatif.engine import _replayed
from traceviz.analyses.whatif.given import Given
from traceviz.analyses.whatif.scenarios import SCENARIOS, parse_scenarios
from traceviz.analyses.work import analysis_windows
from traceviz.opcost.peaks import Peak

if TYPE_CHECKING:  # the Trace type only: trace.py's notebook API imports analyses
    from traceviz.trace import Trace

MAX_ROUNDS = 200


@dataclass
class RanksWhatIf:
    per_rank: pd.DataFrame         # rank, replayed_ns, then one column per scenario
    scenarios: list[str]
    collectives: int               # collectives matched on every rank
    rounds: dict[str, int] = field(default_factory=dict)
    notes: dict[str, list[str]] = field(default_factory=dict)  # assumptions per scenario
    # per scenario ("as recorded" too): each matched collective's start on every rank,
    # on the traces' clock, in the order of ``keys``
    starts: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    keys: list[tuple[str, int]] = field(default_factory=list, repr=False)

    def job(self, scenario: str | None = None) -> int:
        """The job's window time: its slowest rank's (as replayed, or under a scenario)."""
        return int(self.per_rank["replayed_ns" if scenario is None else scenario].max())

    def to_dict(self) -> dict[str, Any]:
        base = self.job()
        return {"collectives": self.collectives, "replayed_ns": base,
                "scenarios": [{"name": s, "predicted_ns": self.job(s),
                               "saving_ns": base - self.job(s),
                               "saving_fraction": (base - self.job(s)) / base if base else None,
                               "rounds": self.rounds.get(s), "assumptions": self.notes.get(s, [])}
                              for s in self.scenarios],
                "per_rank": [{k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()}
                             for r in self.per_rank.to_dict("records")]}


def _keys(trace: Trace, g: ReplayGraph) -> tuple[np.ndarray, list[tuple[str, int]]]:
    """Positions in the graph's device rows of the trace's collectives, and their keys
    (kind, order among the collectives of that kind)."""
    rows = comm_rows(trace)
    if trace.is_cpu or rows.empty:
        return np.zeros(0, np.int64), []
    seq = rows.groupby("kind", sort=False).cumcount().to_numpy()
    where = pd.Series(np.arange(len(g.d_rows)), index=g.d_rows)
    pos = where.reindex(rows["row"].to_numpy()).to_numpy()
    ok = ~np.isnan(pos)
    keys = [(str(k), int(s)) for k, s, o in zip(rows["kind"], seq, ok, strict=True) if o]
    return pos[ok].astype(np.int64), keys


def _joint(graphs: dict[int, ReplayGraph], pos: dict[int, np.ndarray],
           index: dict[int, np.ndarray], transfer: np.ndarray, origin: dict[int, int]
           ) -> tuple[dict[int, ReplayGraph], int, np.ndarray]:
    """Each rank's graph with its matched collectives floored at the latest start over
    the ranks and lasting their transfer time, solved in rounds until nothing moves; the
    collectives' starts."""
    floor = np.full(len(transfer), NEVER)
    out = dict(graphs)
    for rounds in range(1, MAX_ROUNDS + 1):
        latest = np.full(len(transfer), NEVER)
        for r, g in graphs.items():
            nb = np.full(len(g.d_ts), NEVER) if g.d_not_before is None \
                else g.d_not_before.copy()
            dur = g.d_dur.copy()
            p, k = pos[r], index[r]
            nb[p] = np.where(floor[k] == NEVER, NEVER, floor[k] - origin[r])
            dur[p] = transfer[k]
            out[r] = g.with_changes(d_not_before=nb, d_dur=dur)
            start = solve(out[r]).d_start[p] + origin[r]
            np.maximum.at(latest, k, start)
        if np.array_equal(latest, floor):
            return out, rounds, latest
        floor = latest
    return out, MAX_ROUNDS, floor


def whatif_ranks(traces: dict[int, Trace], scenarios: tuple[str, ...],
                 peak: Peak | None = None) -> RanksWhatIf:
    """Replay every rank as recorded and under each scenario, collectives joined
    (``peak``: the device's peak the command resolved, for a scenario that prices by it)."""
    parsed = [(s, parse_scenarios(s)) for s in scenarios]
    graphs = {r: build(t) for r, t in traces.items()}
    origin = {r: int(t.meta.get("origin_ns", 0)) for r, t in traces.items()}
    found = {r: _keys(traces[r], graphs[r]) for r in traces}
    common = sorted(set.intersection(*(set(k) for _, k in found.values()))) if found else []
    at = {key: i for i, key in enumerate(common)}
    pos, index = {}, {}
    transfer = np.full(len(common), np.iinfo(np.int64).max, np.int64)
    for r, (p, keys) in found.items():
        mine = np.array([key in at for key in keys], dtype=bool)
        pos[r] = p[mine]
        index[r] = np.array([at[key] for key, m in zip(keys, mine, strict=True) if m],
                            dtype=np.int64)
        np.minimum.at(transfer, index[r], graphs[r].d_dur[pos[r]])
    result = RanksWhatIf(pd.DataFrame({"rank": sorted(traces)}), list(scenarios), len(common),
                         keys=common)
    base, rounds, result.starts["as recorded"] = _joint(graphs, pos, index, transfer, origin)
    result.per_rank["replayed_ns"] = [_replayed(base[r]).span_ns for r in sorted(traces)]
    result.rounds["as recorded"] = rounds
    given: dict[int, Given] = {}  # a rank's windows, once, where a scenario reads them
    for text, parts in parsed:
        changed, notes = {}, []
        for r, g in graphs.items():
            for name, x in parts:
                spec = SCENARIOS[name]
                if spec.takes_given and r not in given:
                    given[r] = Given(analysis_windows(traces[r]), peak)
                g, said = spec.apply(g, x, given.get(r))
                if r == min(graphs):
                    notes += said
            changed[r] = g
        joined, rounds, result.starts[text] = _joint(changed, pos, index, transfer, origin)
        result.per_rank[text] = [_replayed(joined[r]).span_ns for r in sorted(traces)]
        result.rounds[text] = rounds
        result.notes[text] = notes
    return result
