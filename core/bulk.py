"""Bulk writes for imports: primary keys handed out ahead of an insert, and many rows
inserted at once without building model instances.

The ORM's bulk_create spent most of a large import preparing model objects (two thirds of
a 50k-caption import, most of a 2 M-segment one), so imports write through the cursor
here. Both backends are supported: PostgreSQL gets its sequence and COPY, SQLite the
max(id) rule and multi-row INSERTs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import Model

INSERT_BATCH = 2000  # rows per insert_many call of insert_rows
SQLITE_VARIABLES_PER_STATEMENT = 16_000  # SQLite allows 32,766 variables per statement


def allocate_ids(model: type[Model], count: int) -> list[int]:
    """Primary keys for `count` rows of `model` about to be inserted, so an import needs no
    second lookup to learn them. PostgreSQL hands them out from the id sequence; on SQLite
    the import's transaction holds the write lock (IMMEDIATE mode), so max(id) + 1 onwards
    is safe. Call it inside that transaction."""
    if count == 0:
        return []
    table = model._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)",
                [table, count],
            )
            return [row[0] for row in cursor.fetchall()]
        cursor.execute(f"SELECT COALESCE(MAX(id), 0) FROM {connection.ops.quote_name(table)}")
        first = cursor.fetchone()[0] + 1
        return list(range(first, first + count))


def insert_many(
    table: str, columns: list[str], rows: Sequence[Sequence[Any]], *, suffix: str = ""
) -> None:
    """Inserts rows of database-ready values into `table`'s `columns`. executemany costs a
    round trip per row (75k for 22k segments on psycopg), so PostgreSQL gets COPY and SQLite
    multi-row statements. `suffix` (ON CONFLICT …) needs INSERT, so rows that may conflict
    go through the slower path."""
    if not rows:
        return
    names = ", ".join(connection.ops.quote_name(c) for c in columns)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql" and not suffix:
            with cursor.cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            return
        row_sql = "(" + ", ".join(["%s"] * len(columns)) + ")"
        per_statement = max(1, SQLITE_VARIABLES_PER_STATEMENT // len(columns))
        for start in range(0, len(rows), per_statement):
            chunk = rows[start : start + per_statement]
            cursor.execute(
                f"INSERT INTO {table} ({names}) VALUES {', '.join([row_sql] * len(chunk))}{suffix}",
                [value for row in chunk for value in row],
            )


def insert_rows(
    model: type[Model], rows: list[dict[str, Any]], *, batch_size: int = INSERT_BATCH
) -> None:
    """Inserts rows of `model` given as {attname: value}, every row naming the same
    attributes; every other column gets its model default, prepared by its own field, so
    the SQL follows the model as it grows. The primary key is inserted only when the rows
    name it ("id", from allocate_ids). Raises ValueError for an attribute the model lacks."""
    if not rows:
        return
    fields = [f for f in model._meta.concrete_fields if not (f.primary_key and "id" not in rows[0])]
    by_name = {f.attname: f for f in fields}
    db = connections[DEFAULT_DB_ALIAS]  # not the `connection` proxy: a lookup per value
    default = {f.attname: f.get_db_prep_save(f.get_default(), db) for f in fields}
    given = list(rows[0])
    unknown = set(given) - set(by_name)
    if unknown:
        raise ValueError(f"{model.__name__} has no column(s) {', '.join(sorted(unknown))}")
    values = []
    for row in rows:
        record = dict(default)
        for name in given:
            record[name] = by_name[name].get_db_prep_save(row[name], db)
        values.append([record[f.attname] for f in fields])
    columns = [f.column for f in fields]
    for start in range(0, len(values), batch_size):
        insert_many(model._meta.db_table, columns, values[start : start + batch_size])
