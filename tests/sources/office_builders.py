"""Office files and mail made in-process for the tests (and the package check): workbooks, decks, ODT, ODP, RTF,
EML."""

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
        document.text.addElement(_odf_table(table))
    buffer = io.BytesIO()
    document.write(buffer)
    return buffer.getvalue()


def make_odp(slides: Sequence[tuple[str, str, str]], table: Sequence[Sequence[str]] = (), title: str = "") -> bytes:
    """An OpenDocument presentation: per slide a title frame, a body frame and (when given) speaker notes;
    ``table`` becomes a last slide holding only that table."""
    from odf.draw import Frame, Page, TextBox
    from odf.opendocument import OpenDocumentPresentation
    from odf.presentation import Notes
    from odf.style import MasterPage, PageLayout

    document = OpenDocumentPresentation()
    if title:
        from odf.dc import Title

        document.meta.addElement(Title(text=title))
    layout = PageLayout(name="Layout")
    document.automaticstyles.addElement(layout)
    master = MasterPage(name="Default", pagelayoutname=layout)
    document.masterstyles.addElement(master)

    def framed(parent: object, *paragraphs: str) -> None:
        frame = Frame(width="20cm", height="3cm", x="1cm", y="1cm")
        box = TextBox()
        for text in paragraphs:
            box.addElement(P(text=text))
        frame.addElement(box)
        parent.addElement(frame)  # type: ignore[attr-defined]

    for number, (heading, body, notes) in enumerate(slides, 1):
        page = Page(masterpagename=master, name=f"slide{number}")
        framed(page, heading)
        framed(page, body)
        if notes:
            speaker = Notes()
            framed(speaker, notes)
            page.addElement(speaker)
        document.presentation.addElement(page)
    if table:
        page = Page(masterpagename=master, name="table")
        frame = Frame(width="20cm", height="6cm", x="1cm", y="1cm")
        frame.addElement(_odf_table(table))
        page.addElement(frame)
        document.presentation.addElement(page)
    buffer = io.BytesIO()
    document.write(buffer)
    return buffer.getvalue()


def _odf_table(rows: Sequence[Sequence[str]]) -> Table:
    odf_table = Table(name="T1")
    for row in rows:
        table_row = TableRow()
        for value in row:
            cell = TableCell()
            cell.addElement(P(text=value))
            table_row.addElement(cell)
        odf_table.addElement(table_row)
    return odf_table


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


Attachment = tuple[str, bytes]  # file name, content


def make_msg(
    subject: str,
    *,
    plain: str = "",
    html: str = "",
    sender: tuple[str, str] = ("Ada Lovelace", "ada@example.org"),
    to: Sequence[tuple[str, str]] = (("Grace Hopper", "grace@example.org"),),
    bcc: str = "secret@example.org",
    sent: tuple[int, int, int, int, int] = (2024, 3, 5, 9, 30),  # UTC
    attachments: Sequence[Attachment] = (),
) -> bytes:
    """An Outlook message (.msg: MAPI properties in a compound file, [MS-OXMSG]) written with the compound
    file writer extract-msg ships; no transport headers, as a message saved from Outlook's drafts or sent
    items has none, so the reader takes sender, recipients and date from the properties."""
    import struct
    import tempfile
    from datetime import UTC, datetime
    from pathlib import Path

    from extract_msg.ole_writer import OleWriter

    def string(value: str) -> bytes:
        return value.encode("utf-16-le")

    def fixed(tag: int, value: bytes) -> bytes:
        return struct.pack("<II", tag, 0x6) + value.ljust(8, b"\x00")  # flags: readable, writable

    def variable(tag: int, size: int) -> bytes:
        return struct.pack("<IIII", tag, 0x6, size, 0)

    writer = OleWriter()
    props: list[bytes] = []

    def stream(path: str, tag: int, data: bytes) -> None:
        writer.addEntry(path + f"__substg1.0_{tag:08X}", data=data)

    def text_property(prefix: str, tag: int, value: str, into: list[bytes]) -> None:
        stream(prefix, tag, string(value))
        into.append(variable(tag, len(string(value)) + 2))

    text_property("", 0x001A001F, "IPM.Note", props)
    text_property("", 0x0037001F, subject, props)
    text_property("", 0x0C1A001F, sender[0], props)
    text_property("", 0x5D01001F, sender[1], props)
    text_property("", 0x0E04001F, "; ".join(name for name, _ in to), props)
    if bcc:
        text_property("", 0x0E02001F, bcc, props)
    if plain:
        text_property("", 0x1000001F, plain, props)
    if html:
        stream("", 0x10130102, html.encode("utf-8"))
        props.append(variable(0x10130102, len(html.encode("utf-8"))))
    when = datetime(*sent, tzinfo=UTC)
    filetime = int((when - datetime(1601, 1, 1, tzinfo=UTC)).total_seconds() * 10_000_000)
    props.append(fixed(0x00390040, struct.pack("<Q", filetime)))  # client submit time: the date sent
    props.append(fixed(0x0E060040, struct.pack("<Q", filetime)))  # delivery time
    props.append(fixed(0x0E070003, struct.pack("<I", 1)))  # message flags: read, not unsent
    for n, (name, address) in enumerate(to):
        prefix = f"__recip_version1.0_#{n:08X}/"
        writer.addEntry(prefix[:-1], storage=True)
        recipient: list[bytes] = [fixed(0x0C150003, struct.pack("<I", 1))]  # recipient type: To
        text_property(prefix, 0x3001001F, name, recipient)
        text_property(prefix, 0x3003001F, address, recipient)
        text_property(prefix, 0x39FE001F, address, recipient)
        writer.addEntry(prefix + "__properties_version1.0", data=b"\x00" * 8 + b"".join(recipient))
    for n, (name, content) in enumerate(attachments):
        prefix = f"__attach_version1.0_#{n:08X}/"
        writer.addEntry(prefix[:-1], storage=True)
        attached: list[bytes] = [fixed(0x37050003, struct.pack("<I", 1))]  # attach method: by value
        text_property(prefix, 0x3707001F, name, attached)
        text_property(prefix, 0x3001001F, name, attached)
        stream(prefix, 0x37010102, content)
        attached.append(variable(0x37010102, len(content)))
        writer.addEntry(prefix + "__properties_version1.0", data=b"\x00" * 8 + b"".join(attached))
    writer.addEntry("__nameid_version1.0", storage=True)
    for tag in ("00020102", "00030102", "00040102"):
        writer.addEntry(f"__nameid_version1.0/__substg1.0_{tag}", data=b"")
    header = b"\x00" * 8 + struct.pack("<IIII", len(to), len(attachments), len(to), len(attachments)) + b"\x00" * 8
    writer.addEntry("__properties_version1.0", data=header + b"".join(props))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "message.msg"
        writer.write(path)
        return path.read_bytes()
