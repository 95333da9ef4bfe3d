"""One word for one thing across the public API: ``where=`` filters reads, incremental reads,
deletes and merge clauses; ``updates=`` holds an update clause's assignments; ``meta_fields``
has one default for ``read`` and ``incremental``.  The old keywords (``filters=``,
``condition=``, ``set=``) still work for a release: each emits a ``DeprecationWarning`` naming
the new keyword, at the caller's line, and gives the same result; both given is an
``OptionsError`` before anything is read or written."""

from __future__ import annotations

import re
import warnings

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lakesdk as lk
from lakesdk.format.schema import META_FIELDS
from lakesdk.table.renamed import RENAMED


def _lake(path) -> lk.Lake:
    return lk.Lake(str(path), options=lk.TableOptions(engine="local", markers="direct"))


TARGET = pd.DataFrame({"id": list(range(8)), "p": ["a", "b"] * 4, "ts": [10] * 8, "v": [float(i) for i in range(8)]})
SOURCE = pd.DataFrame({"id": [2, 3, 4, 5, 8, 9], "p": ["a", "b", "a", "b", "a", "b"], "ts": [20, 5, 20, 20, 20, 20],
                       "v": [-2.0, 30.0, 40.0, 50.0, 80.0, -9.0], "gone": [False, False, True, False, False, False]})


@pytest.fixture
def table(tmp_path):
    t = _lake(tmp_path / "lake").create_table("t", key="id", partition_by="p", ordering="ts")
    t.upsert(TARGET)
    return t


def _ids(q) -> list[int]:
    return sorted(q.to_arrow().column("id").to_pylist())


def _deprecated(call, *, new: str, old: str):
    """Run ``call()``, which passes ``old=``: one DeprecationWarning naming ``new=``, pointing at
    this file (the caller's line); returns the result."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = call()
    dep = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert len(dep) == 1, [str(w.message) for w in caught]
    msg = str(dep[0].message)
    assert f"{old}=" in msg and f"pass {new}=" in msg and "deprecated" in msg, msg
    assert dep[0].filename == __file__, dep[0].filename
    return out


def _quiet(call):
    """Run ``call()``: no warning at all."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return call()


# -- reads ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("where", ["v >= 3 AND p = 'a'", [("v", ">=", 3), ("p", "=", "a")]])
def test_read_where_and_its_deprecated_name_filters_give_the_same_rows(table, where):
    new = _quiet(lambda: table.read(where=where))
    old = _deprecated(lambda: table.read(filters=where), new="where", old="filters")
    assert _ids(new) == _ids(old) == [4, 6]


def test_read_with_where_and_filters_both_is_an_options_error(table):
    with pytest.raises(lk.OptionsError, match=r"both where= and filters=") as e:
        table.read(where="v > 1", filters="v > 2")
    assert e.value.key == "where" and isinstance(e.value, ValueError)


def test_incremental_and_delete_take_where(table):
    first = table.timeline.commits[-1]
    table.upsert(pd.DataFrame({"id": [1, 2], "p": ["b", "a"], "ts": [11, 11], "v": [10.0, 20.0]}))
    assert _ids(_quiet(lambda: table.incremental(start=first.completed, where="v > 15"))) == [2]
    res = _quiet(lambda: table.delete(where="v > 15"))
    assert res.deleted == 1 and 2 not in _ids(table.read())


def test_read_and_incremental_have_one_meta_fields_default(table):
    """Both leave Hudi's ``_hoodie_*`` columns out unless ``meta_fields=True`` (incremental
    returned them by default before)."""
    snap, inc = table.read().to_arrow(), table.incremental().to_arrow()
    assert snap.column_names == inc.column_names == list(TARGET.columns)
    for q in (table.read(meta_fields=True), table.incremental(meta_fields=True)):
        assert q.to_arrow().column_names[:len(META_FIELDS)] == list(META_FIELDS)


# -- merges ---------------------------------------------------------------------------------------
def _new_words(m):
    return (m.when_matched_delete(where="s.gone")
            .when_matched_update(updates={"v": "s.v * 2", "ts": "s.ts"}, where="s.ts > t.ts")
            .when_not_matched_insert(values={"id": "s.id", "p": "s.p", "ts": "s.ts", "v": "s.v"}, where="s.v > 0")
            .when_not_matched_by_source_update(updates={"v": "t.v + 100"}, where="t.v > 5")
            .when_not_matched_by_source_delete(where="t.v < 1"))


def _old_words(m):
    return (m.when_matched_delete(condition="s.gone")
            .when_matched_update(set={"v": "s.v * 2", "ts": "s.ts"}, condition="s.ts > t.ts")
            .when_not_matched_insert(values={"id": "s.id", "p": "s.p", "ts": "s.ts", "v": "s.v"}, condition="s.v > 0")
            .when_not_matched_by_source_update(set={"v": "t.v + 100"}, condition="t.v > 5")
            .when_not_matched_by_source_delete(condition="t.v < 1"))


def _rows(t) -> list[dict]:
    return sorted(t.read().to_arrow().to_pylist(), key=lambda r: r["id"])


def test_merge_with_deprecated_set_and_condition_gives_the_rows_of_updates_and_where(tmp_path):
    lake = _lake(tmp_path / "lake")
    got = {}
    for words, build in (("new", _new_words), ("old", _old_words)):
        t = lake.create_table(words, key="id", partition_by="p", ordering="ts")
        t.upsert(TARGET)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            res = build(t.merge(SOURCE, on="id")).execute()
        names = sorted(re.match(r"(\w+\(\w+=)", str(w.message)).group(1) + ")"
                       for w in caught if issubclass(w.category, DeprecationWarning))
        got[words] = (_rows(t), [n for _, n in res.per_clause], (res.updated, res.inserted, res.deleted), names)
    assert got["new"][:3] == got["old"][:3]
    assert got["new"][3] == []
    assert got["old"][3] == ["when_matched_delete(condition=)", "when_matched_update(condition=)",
                             "when_matched_update(set=)", "when_not_matched_by_source_delete(condition=)",
                             "when_not_matched_by_source_update(condition=)", "when_not_matched_by_source_update(set=)",
                             "when_not_matched_insert(condition=)"]
    # deleted 4 (gone); updated 2 and 5 (3 is older); inserted 8 (9 has v < 0); by source: 0 deleted,
    # 6 and 7 updated (1 is not > 5)
    rows = {r["id"]: r["v"] for r in got["new"][0]}
    assert rows == {1: 1.0, 2: -4.0, 3: 3.0, 5: 100.0, 6: 106.0, 7: 107.0, 8: 80.0}


@pytest.mark.parametrize("clause, new, old", [
    ("when_matched_update", {"updates": {"v": "s.v"}, "where": "s.v > 0"}, {"set": {"v": "s.v"}, "where": "s.v > 0"}),
    ("when_matched_update", {"updates": {"v": "s.v"}, "where": "s.v > 0"}, {"updates": {"v": "s.v"},
                                                                           "condition": "s.v > 0"}),
    ("when_not_matched_by_source_update", {"updates": {"v": "t.v"}}, {"set": {"v": "t.v"}}),
    ("when_matched_update_all", {"where": "s.v > 0"}, {"condition": "s.v > 0"}),
    ("when_not_matched_insert_all", {"where": "s.v > 0"}, {"condition": "s.v > 0"}),
    ("when_not_matched_insert", {"values": {"id": "s.id"}, "where": "s.v > 0"},
     {"values": {"id": "s.id"}, "condition": "s.v > 0"}),
    ("when_matched_delete", {"where": "s.gone"}, {"condition": "s.gone"}),
    ("when_not_matched_by_source_delete", {"where": "t.v > 0"}, {"condition": "t.v > 0"}),
])
def test_each_merge_clause_takes_its_old_keyword_with_a_warning(table, clause, new, old):
    m = table.merge(SOURCE, on="id")
    renamed = next(k for k in old if k not in new)
    built_new = _quiet(lambda: getattr(m, clause)(**new))
    built_old = _deprecated(lambda: getattr(m, clause)(**old), new=RENAMED[renamed], old=renamed)
    assert built_new.clauses == built_old.clauses


@pytest.mark.parametrize("clause, kwargs", [
    ("when_matched_update", {"updates": {"v": "s.v"}, "set": {"v": "s.v"}}),
    ("when_matched_update", {"updates": {"v": "s.v"}, "where": "s.v > 0", "condition": "s.v > 0"}),
    ("when_matched_delete", {"where": "s.gone", "condition": "s.gone"}),
    ("when_not_matched_insert_all", {"where": "s.v > 0", "condition": "s.v > 1"}),
    ("when_not_matched_by_source_update", {"updates": {"v": "t.v"}, "set": {"v": "t.v"}}),
])
def test_a_merge_clause_given_a_keyword_and_its_old_name_is_refused_before_writing(table, clause, kwargs):
    before = table.timeline.commits
    with pytest.raises(lk.OptionsError, match=r"was given both") as e:
        getattr(table.merge(SOURCE, on="id"), clause)(**kwargs).execute()
    assert e.value.key in ("updates", "where")
    assert table.refresh().timeline.commits == before


def test_an_update_clause_without_assignments_is_an_options_error(table):
    with pytest.raises(lk.OptionsError, match=r"updates=\{column: expression") as e:
        table.merge(SOURCE, on="id").when_matched_update(where="s.v > 0")
    assert e.value.key == "updates"
    with pytest.raises(lk.OptionsError, match=r"values=\{column: expression"):
        table.merge(SOURCE, on="id").when_not_matched_insert()


def test_merge_clauses_keep_their_positional_order(table):
    m = table.merge(SOURCE, on="id")
    assert m.when_matched_update({"v": "s.v"}, "s.v > 0").clauses == \
        m.when_matched_update(updates={"v": "s.v"}, where="s.v > 0").clauses
    assert m.when_not_matched_insert({"id": "s.id"}, "s.v > 0").clauses == \
        m.when_not_matched_insert(values={"id": "s.id"}, where="s.v > 0").clauses
    assert m.when_matched_delete("s.gone").clauses == m.when_matched_delete(where="s.gone").clauses


WHERE = st.one_of(st.none(), st.sampled_from(["s.v > 0", "t.v < s.v", "s.gone", "NOT s.gone AND s.ts > t.ts"]))
UPDATES = st.dictionaries(st.sampled_from(["v", "ts"]), st.sampled_from(["s.v", "t.v + 1", "s.ts", "NULL"]),
                          min_size=1)
CLAUSES = st.lists(st.one_of(
    st.tuples(st.just("when_matched_update"), WHERE, UPDATES),
    st.tuples(st.just("when_not_matched_by_source_update"), WHERE, UPDATES),
    st.tuples(st.sampled_from(["when_matched_update_all", "when_matched_delete", "when_not_matched_insert_all",
                               "when_not_matched_by_source_delete"]), WHERE, st.none())), min_size=1, max_size=5)


@settings(max_examples=50, deadline=None)
@given(clauses=CLAUSES, positional=st.booleans())
def test_any_clause_list_in_old_words_builds_the_merge_of_new_words(clauses, positional):
    """The builder is what a merge runs: equal clauses, equal merges."""
    from lakesdk.table.merge import MergeBuilder
    new = old = MergeBuilder(table=None, source=None, on=("id",))  # type: ignore[arg-type]
    for name, where, updates in clauses:
        n_args = ((updates, where) if positional else ()) if updates is not None else ((where,) if positional else ())
        n_kw = {} if positional else {**({"updates": updates} if updates is not None else {}), "where": where}
        o_kw = {**({"set": updates} if updates is not None else {}), "condition": where}
        new = _quiet(lambda: getattr(new, name)(*n_args, **n_kw))  # noqa: B023
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            old = getattr(old, name)(**o_kw)
    assert new.clauses == old.clauses
