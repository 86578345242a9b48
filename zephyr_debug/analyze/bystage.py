"""Rows by stage as slices of one stable order: what a groupby on the stage splits, without
hashing the names again or copying each group. The shard table's rows already come stage by
stage (it is built in key order), so for it the order is the rows' own."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class StageSlices:
    """`names`: the stages in order of first appearance; `code`: each row's stage (-1: none);
    stage k's rows are `order[bounds[k]:bounds[k + 1]]` (`order` None: rows `bounds[k]:bounds[k + 1]`)."""

    names: pd.Index
    code: np.ndarray
    order: np.ndarray | None
    bounds: np.ndarray

    def __iter__(self) -> Iterator[tuple[str, slice]]:
        """(stage, its slice of `take`'s arrays), stage by stage."""
        for k, name in enumerate(self.names):
            yield name, slice(int(self.bounds[k]), int(self.bounds[k + 1]))

    def take(self, values: np.ndarray) -> np.ndarray:
        """`values` (one per row) stage by stage, in row order within a stage."""
        return values if self.order is None else values[self.order]

    def rows(self, frame: pd.DataFrame) -> pd.DataFrame:
        """`frame`'s rows stage by stage (the frame itself when they already are)."""
        return frame if self.order is None else frame.iloc[self.order]

    def max(self, values: np.ndarray) -> np.ndarray:
        """Per stage, the max of `values` ignoring NaN (NaN for a stage with none)."""
        v = self.take(np.where(np.isnan(values), -np.inf, values))
        out = np.fmax.reduceat(v, self.bounds[:-1]) if len(v) else np.full(len(self.names), -np.inf)
        return np.where(np.isinf(out), np.nan, out)


def stage_slices(stage: pd.Series) -> StageSlices:
    """The slices of `stage` (a column of stage names; a categorical's codes are read, not its strings)."""
    code, names = pd.factorize(stage)  # stages in order of appearance
    counts = np.bincount(code[code >= 0], minlength=len(names))
    bounds = np.r_[0, np.cumsum(counts)]
    if len(code) and (code[0] < 0 or np.any(code[1:] < code[:-1])):  # not already stage by stage
        known = np.flatnonzero(code >= 0)
        return StageSlices(pd.Index(names), code, known[np.argsort(code[known], kind="stable")], bounds)
    return StageSlices(pd.Index(names), code, None, bounds)
