"""Long-format conjoint data, as ``cjoint`` and ``cregg`` users hold it: one row per profile, with respondent,
task and profile ids, the attribute columns and a 0/1 choice column.

``cjoint::amce(formula, data, respondent.id=, task.id=, profile.id=)`` and ``cregg::cj(data, formula, id=)`` read
this layout; :func:`pairs_from_long` turns it into the one-row-per-pair form that
:class:`~icml26.training.conjoint.PairedConjointLogit` fits (the profile with the smaller profile id is "left").
"""

from __future__ import annotations

import numpy as np

from icml26.errors import InputTypeError, described, input_error

__all__ = ["pairs_from_long"]


def pairs_from_long(data, *, choice: str = "selected", respondent: str = "respondent", task: str = "task",
                    profile: str = "profile", attributes=None, function: str = "pairs_from_long"):
    """(left, right, chosen, respondent_ids) from long-format data (a pandas DataFrame).

    Args:
        data: one row per profile shown; each (respondent, task) must hold exactly two profiles, exactly one of
            them chosen.
        choice: the column holding 1 (or True) for the chosen profile, else 0 (cjoint's ``selected``).
        respondent: the respondent id column (cjoint's ``respondent.id``; the clusters of the sandwich).
        task: the task id column within a respondent (cjoint's ``task.id``).
        profile: the profile id column within a task (cjoint's ``profile.id``); the smaller id is "left".
        attributes: the attribute columns (default: every other column).
        function: the name used in error messages.

    Returns left and right (DataFrames of the attribute columns, one row per task), chosen (1: left chosen)
    and the respondent id of each task.
    """
    if not hasattr(data, "columns") or not hasattr(data, "groupby"):
        raise InputTypeError(function, "data", "a pandas DataFrame, one row per profile",
                             described(type(data).__name__))
    columns = [str(c) for c in data.columns]
    for argument, column in (("choice", choice), ("respondent", respondent), ("task", task), ("profile", profile)):
        if not isinstance(column, str) or column not in columns:
            raise input_error(function, argument, f"a column of data (columns {columns})", column)
    ids = [choice, respondent, task, profile]
    if attributes is None:
        attributes = [c for c in columns if c not in ids]
    if isinstance(attributes, str) or not hasattr(attributes, "__iter__"):
        raise InputTypeError(function, "attributes", "None or a list of column names",
                             described(type(attributes).__name__))
    attributes = list(attributes)
    missing = [a for a in attributes if a not in columns or a in ids]
    if not attributes or missing:
        raise input_error(function, "attributes", f"attribute columns of data other than {ids}",
                          missing or attributes)
    chosen = data[choice]
    values = set(np.unique(np.asarray(chosen, dtype=object)).tolist()) if len(data) else set()
    if not values <= {0, 1}:
        raise input_error(function, "choice", f"a column {choice!r} of 0/1 (or bool) values",
                          sorted(map(str, values))[:5])
    df = data.sort_values([respondent, task, profile], kind="stable")
    sizes = df.groupby([respondent, task], sort=False).size()
    bad = sizes[sizes != 2]
    if len(bad) or not len(sizes):
        first = bad.index[0] if len(bad) else None
        raise input_error(function, "data", "exactly two profiles per (respondent, task)",
                          described(f"task {first} with {int(bad.iloc[0])} profiles" if len(bad) else "no rows"))
    wins = df.groupby([respondent, task], sort=False)[choice].sum()
    bad = wins[wins != 1]
    if len(bad):
        raise input_error(function, "choice", "exactly one chosen profile per (respondent, task)",
                          described(f"task {bad.index[0]} with {int(bad.iloc[0])} chosen"))
    left, right = df.iloc[0::2], df.iloc[1::2]
    return (left[attributes].reset_index(drop=True), right[attributes].reset_index(drop=True),
            left[choice].astype(int).to_numpy(), left[respondent].to_numpy())
