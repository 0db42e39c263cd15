"""Tables as documents: an Excel workbook (`load_xlsx`, by openpyxl), an OpenDocument spreadsheet (`load_ods`, its
XML streamed by lxml: `declrag.ingest._odf`) and CSV/TSV (`load_delimited`, Python's csv).

A file is one document; each sheet is a section of it, headed ``Sheet: Budget`` (a passage's section names its sheet),
over one table: its first non-empty row is the header row, and every row starts with its row number in the sheet (the
column ``Row``), so that a passage cites the rows it holds, and a chunk cut from a long table carries the header row
(`declrag.ingest._units`).
Values are those the file stores (a formula's last computed value). Hidden sheets are left out, each said so; cell
comments are not read. A file is read up to `MAX_ROWS` rows: the rows past it are named, never dropped silently.
"""

from __future__ import annotations

import csv
import io
import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from ._files import LoadError, Read, Skipped, decode
from ._odf import odf_sheets, odf_title
from ._writer import Writer, cell_text

MAX_ROWS = 200_000  # rows read from one file, all its sheets together
MAX_COLUMNS = 1_000  # cells read from one row


def _rows(values: Iterable[Iterable[Any]], first: int = 1) -> Iterator[tuple[int, list[str]]]:
    """``(row number, cells)`` of each non-empty row, empty trailing cells cut; a row with text past its
    `MAX_COLUMNS`th cell keeps its first `MAX_COLUMNS` and one more, empty, cell (`_Book.sheet` counts it)."""
    for n, row in enumerate(values, first):
        cells_in = iter(row)
        cells = [cell_text(v) for v in itertools.islice(cells_in, MAX_COLUMNS)]
        if any(v is not None and str(v).strip() for v in cells_in):
            cells.append("")  # a mark: the row was cut
        else:
            while cells and not cells[-1]:
                cells.pop()
        if cells:
            yield n, cells


def _header_row(rows: Sequence[tuple[int, list[str]]], look: int = 50) -> int:
    """Which of the first rows is the header: the first with at least half the table's cells filled (a title or a
    note above a table fills one); 0 for a table of one column."""
    filled = [sum(1 for c in cells if c) for _, cells in rows[:look]]
    width = max(filled)
    return next((i for i, n in enumerate(filled) if n >= max(2, (width + 1) // 2)), 0) if width >= 2 else 0


class _Book:
    """The sheets of one file, written as one document under the file's row budget."""

    def __init__(self, source: str, title: str) -> None:
        self.source, self.title, self.left = source, title, MAX_ROWS
        self.writer = Writer()
        self.skipped: list[Skipped] = []

    def sheet(self, name: str | None, rows: Iterator[tuple[int, list[str]]], declared: int | None = None) -> None:
        """One sheet: its heading (none for a CSV), then its table; ``declared``: the rows the file says it has."""
        taken = list(itertools.islice(rows, self.left))
        more = next(rows, None)
        if more is not None:
            last = f"of {declared:,}" if declared else "onward"
            self.skipped.append(Skipped(self.source, f"rows {more[0]:,} {last} left out: a file is read up to "
                                        f"{MAX_ROWS:,} rows (split it, or keep the rows questions are about)",
                                        part=f"sheet '{name}'" if name else "rows"))
        self.left -= len(taken)
        if cut := sum(len(cells) > MAX_COLUMNS for _, cells in taken):
            self.skipped.append(Skipped(self.source, f"the cells past the {MAX_COLUMNS:,}th of {cut:,} row"
                                        f"{'s' * (cut != 1)} left out", part=f"sheet '{name}'" if name else "cells"))
            taken = [(n, cells[:MAX_COLUMNS]) for n, cells in taken]
        if not taken:
            return
        writer = self.writer
        if name is not None:
            writer.heading(1, f"Sheet: {name}")
        at = _header_row(taken)
        for _, cells in taken[:at]:  # a title above the table, as people write them: its caption
            writer.paragraph(" ".join(c for c in cells if c))
        (_, header), body = taken[at], taken[at + 1:]
        width = max(len(cells) for _, cells in taken[at:])
        writer.table(["Row", *header], [[str(n), *cells, *[""] * (width - len(cells))] for n, cells in body])

    def read(self, what: str) -> Read:
        if not self.writer.units:
            raise LoadError(f"no cells with text in {what}" + (f" ({self.skipped[0].reason})" if self.skipped else ""))
        return Read([self.writer.document(self.source, self.title)], self.skipped)


def load_xlsx(data: bytes, source: str, name: str) -> Read:
    """An Excel workbook (.xlsx, .xlsm): its visible sheets, each a table."""
    import openpyxl

    try:
        wb = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except Exception as e:
        raise LoadError(f"not a readable Excel workbook ({type(e).__name__}): a corrupt or unsupported file") from e
    book = _Book(source, (wb.properties.title or "").strip() or name)
    try:
        for ws in wb.worksheets:
            if ws.sheet_state != "visible":
                book.skipped.append(Skipped(source, f"{ws.sheet_state} sheet: left out", part=f"sheet '{ws.title}'"))
                continue
            declared = ws.max_row if isinstance(ws.max_row, int) and ws.max_row > 1 else None
            # the rows as the file has them: a declared size is not trusted (a wrong one cuts the sheet short, a
            # far corner cell pads every row to thousands of empty cells)
            ws.reset_dimensions()
            book.sheet(ws.title, _rows(ws.iter_rows(min_row=1, values_only=True)), declared)
    finally:
        wb.close()
    return book.read("any visible sheet")


def load_ods(data: bytes, source: str, name: str) -> Read:
    """An OpenDocument spreadsheet (.ods): its visible sheets, each a table (content.xml streamed by lxml)."""
    book = _Book(source, odf_title(data) or name)
    for (_, sheet, hidden), rows in itertools.groupby(odf_sheets(data, MAX_COLUMNS), key=lambda r: r[:3]):
        if hidden:
            book.skipped.append(Skipped(source, "hidden sheet: left out", part=f"sheet '{sheet}'"))
            continue
        book.sheet(sheet, ((n, cells) for *_, n, cells in rows))
    return book.read("any visible sheet")


def load_delimited(data: bytes, source: str, name: str, tab: bool = False) -> Read:
    """A CSV (its delimiter sniffed among , ; | and tab) or TSV file: one table, each row with its line number."""
    text = decode(data)
    delimiter = "\t"
    if not tab:
        try:
            delimiter = csv.Sniffer().sniff(text[:16384], delimiters=",;|\t").delimiter
        except csv.Error:
            delimiter = ","
    csv.field_size_limit(max(csv.field_size_limit(), 2**24))  # a long cell (16 MB at most) is no error
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    starts: list[int] = []  # the line each record starts on (a quoted cell may span lines)

    def records() -> Iterator[list[str]]:
        while True:
            starts.append(reader.line_num + 1)
            try:
                yield next(reader)
            except StopIteration:
                return

    try:
        book = _Book(source, name)
        book.sheet(None, ((starts[n - 1], cells) for n, cells in _rows(records())))
    except csv.Error as e:
        raise LoadError(f"not valid {'TSV' if tab else 'CSV'} (line {reader.line_num}: {e})") from e
    return book.read("the file")
