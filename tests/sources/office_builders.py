"""Office files and mail made in-process for the tests (and the package check): workbooks, decks, ODT, RTF, EML."""

from __future__ import annotations

import io
from collections.abc import Sequence

import xlsxwriter  # installed with python-pptx (it writes chart workbooks); here it writes test workbooks
from odf.opendocument import OpenDocumentSpreadsheet, OpenDocumentText
from odf.table import Table, TableCell, TableRow
from odf.text import H, P
from pptx import Presentation
from pptx.util import Inches

Sheet = tuple[str, Sequence[Sequence[object]]]

BUDGET: Sheet = ("Budget", [["Region", "Amount", "Owner"], ["North", 120, "Ada"], ["South", 75.5, "Zelmira"]])
STAFF: Sheet = ("Staff", [["Name", "Role"], ["Grace", "auditor"], ["Linus", "quartermaster"]])


def make_xlsx(sheets: Sequence[Sheet] = (BUDGET, STAFF), *, first_row: int = 0) -> bytes:
    buffer = io.BytesIO()
    workbook = xlsxwriter.Workbook(buffer, {"in_memory": True})
    for name, rows in sheets:
        sheet = workbook.add_worksheet(name)
        for index, row in enumerate(rows):
            sheet.write_row(first_row + index, 0, list(row))
    workbook.close()
    return buffer.getvalue()


def make_ods(sheets: Sequence[Sheet] = (BUDGET, STAFF)) -> bytes:
    document = OpenDocumentSpreadsheet()
    for name, rows in sheets:
        table = Table(name=name)
        for row in rows:
            table_row = TableRow()
            for value in row:
                if isinstance(value, int | float):
                    cell = TableCell(valuetype="float", value=value)
                else:
                    cell = TableCell(valuetype="string")
                cell.addElement(P(text=str(value)))
                table_row.addElement(cell)
            table.addElement(table_row)
        document.spreadsheet.addElement(table)
    buffer = io.BytesIO()
    document.write(buffer)
    return buffer.getvalue()


def make_pptx(slides: Sequence[tuple[str, str, str]], title: str = "Quarterly Deck") -> bytes:
    """One title-and-content slide per ``(title, body, speaker notes)``; empty notes: no notes slide."""
    deck = Presentation()
    deck.core_properties.title = title
    deck.core_properties.author = "Ada Lovelace"
    for heading, body, notes in slides:
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = heading
        slide.placeholders[1].text = body
        if notes:
            slide.notes_slide.notes_text_frame.text = notes
    table_slide = deck.slides.add_slide(deck.slide_layouts[5])
    table_slide.shapes.title.text = "Figures"
    table = table_slide.shapes.add_table(2, 2, Inches(1), Inches(2), Inches(6), Inches(1)).table
    for (r, c), text in {(0, 0): "Metric", (0, 1): "Value", (1, 0): "Churn", (1, 1): "4 percent"}.items():
        table.cell(r, c).text = text
    buffer = io.BytesIO()
    deck.save(buffer)
    return buffer.getvalue()


def make_odt(paragraphs: Sequence[str], table: Sequence[Sequence[str]] = (), title: str = "") -> bytes:
    document = OpenDocumentText()
    if title:
        from odf.dc import Title

        document.meta.addElement(Title(text=title))
    document.text.addElement(H(outlinelevel=1, text="Field Notes"))
    for text in paragraphs:
        document.text.addElement(P(text=text))
    if table:
        odf_table = Table(name="T1")
        for row in table:
            table_row = TableRow()
            for value in row:
                cell = TableCell()
                cell.addElement(P(text=value))
                table_row.addElement(cell)
            odf_table.addElement(table_row)
        document.text.addElement(odf_table)
    buffer = io.BytesIO()
    document.write(buffer)
    return buffer.getvalue()


def make_rtf(paragraphs: Sequence[str]) -> bytes:
    body = "".join(_rtf_escape(text) + "\\par\n" for text in paragraphs)
    return (
        "{\\rtf1\\ansi\\ansicpg1252\\deff0{\\fonttbl{\\f0 Times New Roman;}}"
        "{\\info{\\title Hidden Info Title}{\\author Someone}}\n\\f0 " + body + "}"
    ).encode("ascii")


def _rtf_escape(text: str) -> str:
    out = []
    for char in text:
        if char in "\\{}":
            out.append("\\" + char)
        elif ord(char) < 128:
            out.append(char)
        else:
            out.append(f"\\'{char.encode('cp1252').hex()}")
    return "".join(out)


def make_eml(subject: str, *, plain: str = "", html: str = "", attachment: bytes = b"") -> bytes:
    """A message from Ada to Grace: a plain body, an HTML body, or both (multipart/alternative)."""
    from email.message import EmailMessage
    from email.policy import SMTP

    message = EmailMessage()
    message["Subject"] = subject
    message["From"] = "Ada Lovelace <ada@example.org>"
    message["To"] = "Grace Hopper <grace@example.org>"
    message["Bcc"] = "secret@example.org"
    message["Date"] = "Tue, 05 Mar 2024 10:30:00 +0100"
    message["Message-ID"] = "<1@example.org>"
    if plain:
        message.set_content(plain)
    if html:
        if plain:
            message.add_alternative(html, subtype="html")
        else:
            message.set_content(html, subtype="html")
    if attachment:
        message.add_attachment(attachment, maintype="application", subtype="octet-stream", filename="a.bin")
    return message.as_bytes(policy=SMTP)
