"""Reading input files: CSV (with or without a header row), JSON lines, Parquet and mail
archives, for every workflow and deployment that reads a file.

* Formats (:mod:`.sources`): ``format`` if given, else the suffix (``.csv``; ``.jsonl``,
  ``.json``, ``.ndjson``; ``.parquet``, ``.pq``; ``.tar``, ``.tgz``, ``.tar.gz``, ... for
  mail), else the caller's default. Compression (gzip, bzip2, xz) is read from the file's
  first bytes and decompressed as a stream, capped by ``--max-input-gib``.
* Header rule (:mod:`.csv_tables`): a CSV file has a header row unless ``columns`` names
  its columns (CLI ``--columns a,b,c``); then every row is a record, and a first row equal
  to ``columns`` is refused. Nothing is guessed.
* Cells are strings, None when missing (an empty CSV cell, a JSON null, a Parquet null).
  :func:`read_chunks` streams them a chunk of records at a time (memory: one chunk);
  :func:`read_table` collects them; :func:`numeric_column` makes floats (missing: NaN).
* Errors are one line naming the file: a missing column names it and the file's column
  names (schema, not data); a malformed row or line is refused by the rule it breaks,
  never quoted; Parquet needs ``pip install 'privreg[parquet]'`` and says so.

Mail archives (:mod:`.mail`) are tar files in the SpamAssassin corpus layout; read as a
table they have the columns name, folder, label, user_id (a sender pseudonym) and text.
"""

from __future__ import annotations

from privreg.readers.columns import (
    check_columns_given,
    header_names,
    looks_like_record,
    missing_columns_error,
    names_option,
    numeric_column,
    require_columns,
)
from privreg.readers.csv_tables import FIELD_LIMIT, csv_chunks, csv_names, csv_rows
from privreg.readers.jsonl_tables import (
    JsonlColumns,
    json_cell,
    jsonl_cells,
    jsonl_chunks,
    jsonl_line_chunks,
    jsonl_objects,
    jsonl_parse,
)
from privreg.readers.mail import (
    HAM_FOLDERS,
    MAIL_COLUMNS,
    MAIL_FOLDERS,
    MAX_MESSAGE_BYTES,
    SPAM_FOLDERS,
    MailMessage,
    mail_chunks,
    mail_messages,
    message_sender,
    message_text,
    parse_message,
)
from privreg.readers.parquet_tables import PARQUET_INSTALL, parquet_chunks, parquet_names, require_pyarrow
from privreg.readers.sources import (
    COMPRESSION_SUFFIXES,
    FORMAT_SUFFIXES,
    FORMATS,
    check_file,
    compression,
    detect_format,
    open_binary,
    open_text,
    reading_input,
)
from privreg.readers.tables import CHUNK_ROWS, Cells, read_chunks, read_table

__all__ = [
    "CHUNK_ROWS",
    "COMPRESSION_SUFFIXES",
    "Cells",
    "FIELD_LIMIT",
    "FORMATS",
    "FORMAT_SUFFIXES",
    "HAM_FOLDERS",
    "JsonlColumns",
    "MAIL_COLUMNS",
    "MAIL_FOLDERS",
    "MAX_MESSAGE_BYTES",
    "MailMessage",
    "PARQUET_INSTALL",
    "SPAM_FOLDERS",
    "check_columns_given",
    "check_file",
    "compression",
    "csv_chunks",
    "csv_names",
    "csv_rows",
    "detect_format",
    "header_names",
    "json_cell",
    "jsonl_cells",
    "jsonl_chunks",
    "jsonl_line_chunks",
    "jsonl_objects",
    "jsonl_parse",
    "looks_like_record",
    "mail_chunks",
    "mail_messages",
    "message_sender",
    "message_text",
    "missing_columns_error",
    "names_option",
    "numeric_column",
    "open_binary",
    "open_text",
    "parquet_chunks",
    "parquet_names",
    "parse_message",
    "read_chunks",
    "read_table",
    "reading_input",
    "require_columns",
    "require_pyarrow",
]
