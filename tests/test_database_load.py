"""How run artifacts reach the database: DuckDB's json_transform over text read once, or
DuckDB's reader where a value would convert otherwise. Both must give the same tables."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from generate_verify_assets import cell_run, load_cell_run

from ledger.database import _database as database
from ledger.formats import columns
from ledger.formats.jsonio import write_json
from ledger.imports import import_files
from tests.conftest import DATA

SPEC = {
    "s": "VARCHAR",
    "i": "BIGINT",
    "d": "DOUBLE",
    "b": "BOOLEAN",
    "j": "JSON",
    "o": {"x": "BIGINT"},
    "l": [{"y": "VARCHAR"}],
}

# What each scalar type takes as it is, and values of every other JSON type it does not.
VALUES: dict[str, Any] = {
    "string": "5",
    "int": 5,
    "float": 5.5,
    "whole float": 5.0,
    "bool": True,
    "object": {"x": 1},
    "array": [1],
    "int64 max": (1 << 63) - 1,
    "int64 min": -(1 << 63),
    "past int64": 1 << 63,
    "below int64": -(1 << 63) - 1,
}
TAKES = {
    "s": {"string"},
    "i": {"int", "int64 max", "int64 min"},
    "d": {"int", "float", "whole float", "int64 max", "int64 min"},
    "b": {"bool"},
    "j": set(VALUES),
}


@pytest.mark.parametrize("field", sorted(TAKES))
@pytest.mark.parametrize("value", sorted(VALUES))
def test_a_scalar_converts_exactly_only_with_its_own_json_type(
    field: str, value: str, tmp_path: Path
) -> None:
    check = columns.checker(SPEC)
    assert check({field: VALUES[value]}) is (value in TAKES[field])
    # Absent and null are NULL either way.
    assert check({}) and check({field: None})
    if value in TAKES[field]:
        # What the checker lets through, DuckDB's two readers give alike.
        text = json.dumps({field: VALUES[value]})
        (tmp_path / "one.json").write_text(text)
        con = duckdb.connect()
        column = columns.read_json_columns({field: SPEC[field]})
        read = con.execute(
            f"SELECT * FROM read_json(?, columns={column}, format='auto')",
            [str(tmp_path / "one.json")],
        ).fetchall()
        transformed = con.execute(
            "SELECT unnest(json_transform(?::VARCHAR, ?))",
            [text, columns.structure({field: SPEC[field]})],
        ).fetchall()
        assert read == transformed and read[0][0] is not None


def test_structs_and_lists_are_checked_all_the_way_down() -> None:
    check = columns.checker(SPEC)
    assert check({"o": {"x": 1, "other": "anything"}, "l": [{"y": "a"}, None, {}]})
    for wrong in (
        {"o": [1]},
        {"o": "x"},
        {"o": {"x": "1"}},
        {"l": {"y": "a"}},
        {"l": [{"y": "a"}, {"y": 1}]},
        {"l": ["a"]},
    ):
        assert not check(wrong), wrong
    assert not check([{"s": "a"}]) and not check("text")


@pytest.mark.parametrize(
    ("fields", "document", "column"),
    [
        (
            columns.CELL_RUN_FIELDS,
            load_cell_run(),
            ("stage", 'STRUCT("name" VARCHAR, kind VARCHAR)'),
        ),
        (columns.IMPORTED_RUN_FIELDS, {"requests": [{}]}, ("stage", "VARCHAR")),
    ],
)
def test_both_readers_give_the_columns_the_same_types(
    fields: dict[str, Any], document: dict[str, Any], column: tuple[str, str], tmp_path: Path
) -> None:
    path = tmp_path / "run.json"
    write_json(path, document)
    con = duckdb.connect()
    types = columns.read_json_columns(fields)
    con.execute(f"CREATE TABLE a AS SELECT * FROM read_json(?, columns={types})", [str(path)])
    con.execute(
        "CREATE TABLE b AS SELECT unnest(json_transform(?::VARCHAR, ?))",
        [path.read_text(), columns.structure(fields)],
    )
    described = [[row[:2] for row in con.execute(f"DESCRIBE {t}").fetchall()] for t in "ab"]
    assert described[0] == described[1] and [name for name, _ in described[0]] == list(fields)
    assert column in described[0]


def _odd_cell_run() -> dict[str, Any]:
    """A cell run every value of which converts exactly, in the shapes a value may take:
    identity a string, numbers where doubles are, absent and null fields, nested text."""
    document = load_cell_run()
    document["identity"] = {"os": "linux", "note": 'caf\u00e9\n\t"quoted"', "list": [1, None]}
    document["cell"]["temperature"] = 1
    document["cell"]["arrival"]["rate"] = 20
    first, second, third = document["requests"]
    first["server_timings"] = {"prompt_ms": 3, "predicted_n": 3.0, "predicted_ms": 25.5}
    second["usage"]["cached_tokens"] = None
    del third["finish_reason"]
    third["error"] = {"class": "http-503", "message": "x"}
    return document


def _tables(db: database.Database) -> dict[str, tuple[tuple[Any, ...], ...]]:
    return {
        table: db.query(f"SELECT * FROM {table} ORDER BY ALL").rows
        for table in ("cell_run_files", "imported_run_files", "request_rows", "cell_settings")
    }


@pytest.fixture
def transformed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Counts the files each json_transform batch loads."""
    seen: list[int] = []
    real = database._transform

    def counted(con: Any, table: str, fields: Any, batch: list[Any]) -> None:
        if batch:
            seen.append(len(batch))
        real(con, table, fields, batch)

    monkeypatch.setattr(database, "_transform", counted)
    yield seen


def _campaign(tmp_path: Path, documents: dict[str, dict[str, Any]]) -> Path:
    folder = tmp_path / "2026-11-01-asset-campaign"
    for rel, document in documents.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        write_json(folder / rel, document)
    return folder


def test_runs_read_from_their_text_load_as_duckdb_s_reader_loads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, transformed: list[int]
) -> None:
    plain = cell_run()
    plain["cell"]["id"] = "ctx1024-c2-nothink"
    folder = _campaign(tmp_path, {"a/odd.json": _odd_cell_run(), "b/plain.json": plain})
    fast = _tables(database.build([folder]))
    assert transformed == [2]
    monkeypatch.setattr(columns, "loads_as_text", lambda document: False)
    slow = _tables(database.build([folder]))
    assert transformed == [2]
    assert fast == slow
    assert len(fast["request_rows"]) == 5 and len(fast["cell_settings"]) == 2


def test_imported_runs_read_from_their_text_load_as_duckdb_s_reader_loads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, transformed: list[int]
) -> None:
    campaign = "2026-11-02-imported"
    real = DATA / "realworld" / "vllm-bench-serve" / "vllm-0.15.0-qwen3-8b-tp8-c50-detailed.json"
    # Its first 100 requests: the whole run, with every gap, is over the 1 MiB read here.
    document = json.loads(real.read_text())
    for key, value in list(document.items()):
        if isinstance(value, list):
            document[key] = value[:100]
        elif key.endswith("_ms"):
            del document[key]
    source = tmp_path / "vllm-first-100.json"
    source.write_text(json.dumps(document))
    import_files("vllm", [source], raw_dir=tmp_path, campaign=campaign, arm="baseline")
    folder = tmp_path / campaign
    fast = _tables(database.build([folder]))
    assert transformed == [1] and len(fast["imported_run_files"]) == 1
    monkeypatch.setattr(columns, "loads_as_text", lambda document: False)
    assert _tables(database.build([folder])) == fast


def test_batches_bound_the_text_held_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, transformed: list[int]
) -> None:
    documents = {}
    for index in range(5):
        document = cell_run()
        document["cell"]["id"] = f"ctx1024-c{index + 1}-nothink"
        documents[f"cells/{index}.json"] = document
    folder = _campaign(tmp_path, documents)
    whole = _tables(database.build([folder]))
    assert transformed == [5]
    monkeypatch.setattr(database, "_TRANSFORM_BATCH", 1)
    assert _tables(database.build([folder])) == whole
    assert transformed == [5, 1, 1, 1, 1, 1]


@pytest.mark.parametrize(
    ("field", "wrong", "said"),
    [
        ("temperature", "0.0", '"0.0" is not a number'),
        ("temperature", "abc", '"abc" is not a number'),
        ("temperature", [1], "[1] is not a number"),
        ("seed", 1 << 63, f"{1 << 63} is not a whole number"),
        ("seed", True, "true is not a whole number"),
        ("controlled_output", 1, "1 is not true or false"),
    ],
)
def test_a_run_with_a_value_of_another_type_is_refused_as_verify_refuses_it(
    tmp_path: Path, field: str, wrong: object, said: str
) -> None:
    """DuckDB's reader converts "0.0" to 0.0, true to 1 and 2.5 to 2: a run that verify
    calls schema-invalid was loaded as if it were valid. It is refused, by pointer."""
    loose = cell_run()
    loose["cell"][field] = wrong
    loose["cell"]["id"] = "ctx1024-c2-nothink"
    folder = _campaign(tmp_path, {"a.json": cell_run(), "b.json": loose})
    with pytest.raises(database.DatabaseError) as raised:
        database.build([folder])
    assert str(raised.value).startswith(f"{folder / 'b.json'}#/cell/{field}: {said} ")


def test_a_run_that_changes_between_its_sniff_and_its_load_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _campaign(tmp_path, {"cell.json": cell_run()})
    real = database._schemas

    def then_changed(*args: Any) -> Any:
        found = real(*args)
        document = cell_run()
        document["requests"][0]["sent_ns"] += 1
        write_json(folder / "cell.json", document)
        return found

    monkeypatch.setattr(database, "_schemas", then_changed)
    with pytest.raises(database.DatabaseError, match=r"cell\.json: changed while the database"):
        database.build([folder])


def test_a_large_run_is_read_by_duckdb_s_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, transformed: list[int]
) -> None:
    folder = _campaign(tmp_path, {"cell.json": cell_run()})
    monkeypatch.setattr(database, "_SNIFF_IN_PYTHON", 100)
    db = database.build([folder])
    assert transformed == []
    assert db.query("SELECT count(*) FROM request_rows").rows == ((2,),)


def test_a_copy_of_a_folder_loads_the_same(tmp_path: Path, transformed: list[int]) -> None:
    # Two campaigns whose runs are byte for byte alike but for their ids: one batch, each
    # row under its own campaign.
    first = _campaign(tmp_path / "one", {"cell.json": cell_run()})
    second = tmp_path / "two" / "2026-11-03-other"
    shutil.copytree(first, second)
    text = (second / "cell.json").read_text().replace(first.name, second.name)
    (second / "cell.json").write_text(text)
    db = database.build([first, second])
    assert transformed == [2]
    counts = db.query("SELECT campaign_id, count(*) FROM request_rows GROUP BY 1 ORDER BY 1")
    assert counts.rows == ((first.name, 2), (second.name, 2))


def _known(folder: Path) -> dict[str, Any]:
    """What verify's workers tell a build of these files (as scan.FileResult has it)."""
    from ledger.evidence import scan, tree

    out: dict[str, Any] = {}
    for entry in tree.list_campaign(folder).entries:
        found = scan.process_file(scan.FileTask(entry.path, entry.rel, True, entry.identity))
        assert found.parsed and found.sha256 is not None and found.size is not None
        told = found.artifact
        out[entry.path] = (
            None if told is None else (found.schema, told[0], found.sha256, found.size, told[1])
        )
    return out


def test_a_build_told_what_its_files_are_reads_none_of_them_to_learn_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, transformed: list[int]
) -> None:
    plain = cell_run()
    plain["cell"]["id"] = "ctx1024-c2-nothink"
    folder = _campaign(tmp_path, {"a.json": _odd_cell_run(), "b.json": plain})
    write_json(folder / "notes.json", {"not": "an artifact"})
    known = _known(folder)
    assert known[str(folder / "notes.json")] is None
    alone = _tables(database.build([folder]))
    sniffed: list[str] = []
    real = database._sniff
    monkeypatch.setattr(
        database, "_sniff", lambda file, *rest: sniffed.append(file) or real(file, *rest)
    )
    assert _tables(database.build([folder], known=known)) == alone
    assert sniffed == [] and transformed == [2, 2]
    # Told too little, it reads the rest; told a run is too large for text, DuckDB reads it.
    del known[str(folder / "a.json")]
    schema, campaign, digest, _, _ = known[str(folder / "b.json")]
    known[str(folder / "b.json")] = (schema, campaign, digest, database._SNIFF_IN_PYTHON + 1, True)
    assert _tables(database.build([folder], known=known)) == alone
    assert sniffed == [str(folder / "a.json")] and transformed == [2, 2, 1]


def test_a_build_told_a_digest_the_file_no_longer_has_refuses(tmp_path: Path) -> None:
    folder = _campaign(tmp_path, {"cell.json": cell_run()})
    known = _known(folder)
    schema, campaign, _, size, as_text = known[str(folder / "cell.json")]
    known[str(folder / "cell.json")] = (schema, campaign, "0" * 64, size, as_text)
    with pytest.raises(database.DatabaseError, match=r"cell\.json: changed while the database"):
        database.build([folder], known=known)


def test_a_build_told_a_run_does_not_load_as_text_leaves_it_to_duckdb_s_reader(
    tmp_path: Path, transformed: list[int]
) -> None:
    loose = cell_run()
    loose["cell"]["temperature"] = "0.0"
    loose["cell"]["id"] = "ctx1024-c2-nothink"
    folder = _campaign(tmp_path, {"a.json": cell_run(), "b.json": loose})
    known = _known(folder)
    assert known[str(folder / "a.json")][4] is True and known[str(folder / "b.json")][4] is False
    # Alone, the build reads the run and refuses it; told by verify (which reports it
    # schema-invalid, and derives nothing from it), it leaves it to DuckDB's reader.
    with pytest.raises(database.DatabaseError, match="/cell/temperature"):
        database.build([folder])
    database.build([folder], known=known).close()
    assert transformed == [1]
