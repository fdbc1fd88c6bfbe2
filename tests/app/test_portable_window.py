"""Export base… / Import base… in the bases sidebar: progress while it runs, a summary at the end."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from knowledge.compose import open_quire
from tests.app.conftest import WindowFactory
from tests.portable.helpers import base_content, synthetic_base
from tests.support.prompters import ScriptedPrompter


def test_export_then_import_from_the_sidebar(
    qtbot: QtBot, open_window: WindowFactory, prompter: ScriptedPrompter, data_dir: Path, tmp_path: Path
) -> None:
    quire = open_quire(data_dir)
    try:
        synthetic_base(quire, "Research", files=300, chunks_per_file=4)
        expected = base_content(quire, "Research")
    finally:
        quire.close()
    window = open_window()
    panel = window.bases_panel
    qtbot.waitUntil(lambda: [b.name for b in window.ctx.bases] == ["Research"], timeout=10_000)
    window.ctx.select_base(window.ctx.bases[0])
    assert panel.export_button.isEnabled()

    shown: list[tuple[int, int]] = []
    panel.progress.valueChanged.connect(lambda v: shown.append((v, panel.progress.maximum())))
    file = tmp_path / "research.quirebase"
    prompter.save_files = [file]
    panel.export_button.click()
    status = window.statusBar()
    qtbot.waitUntil(lambda: "Exported 'Research'" in status.currentMessage(), timeout=60_000)
    assert "301 items, 1200 chunks, 300 files" in status.currentMessage()
    assert file.is_file()
    assert not panel.progress.isVisible()
    assert any(v > 0 for v, _m in shown)  # the bar moved while the export ran

    # importing the same file here: the name is taken, so the window asks for another one
    shown.clear()
    prompter.open_files = [file]
    prompter.texts = ["Research (copy)"]
    panel.import_button.click()
    qtbot.waitUntil(lambda: "Imported 'Research (copy)'" in status.currentMessage(), timeout=60_000)
    assert "301 items, 1200 chunks, searchable now" in status.currentMessage()
    assert prompter.asked.count("Import knowledge base") == 2  # the file, then the new name
    qtbot.waitUntil(lambda: window.ctx.base is not None and window.ctx.base.name == "Research (copy)", timeout=10_000)
    assert sorted(b.name for b in window.ctx.bases) == ["Research", "Research (copy)"]
    assert any(v > 0 for v, _m in shown)
    check = open_quire(data_dir)
    try:
        assert base_content(check, "Research (copy)")["chunks"] == expected["chunks"]
    finally:
        check.close()


def test_a_refused_import_says_why(
    qtbot: QtBot, open_window: WindowFactory, prompter: ScriptedPrompter, tmp_path: Path
) -> None:
    window = open_window()
    bogus = tmp_path / "bogus.quirebase"
    bogus.write_text("not a base")
    prompter.open_files = [bogus]
    window.bases_panel.import_button.click()
    qtbot.waitUntil(lambda: "not a Quire base export" in window.message_bar.text(), timeout=30_000)
    assert window.ctx.bases == []
    assert not window.bases_panel.progress.isVisible()


def test_a_damaged_database_is_diagnosed_at_start(
    qtbot: QtBot, prompter: ScriptedPrompter, data_dir: Path, tmp_path: Path
) -> None:
    from app.window import MainWindow
    from knowledge.portable.backup import backup_data_dir
    from knowledge.store.database import DB_FILENAME
    from tests.portable.test_private_backup_doctor import damage_table

    quire = open_quire(data_dir)
    try:
        synthetic_base(quire, "Research", files=5, chunks_per_file=2)
        backup_data_dir(quire, tmp_path / "backups")
    finally:
        quire.close()
    damage_table(data_dir / DB_FILENAME, "sqlite_master")
    before = (data_dir / DB_FILENAME).read_bytes()
    window = MainWindow(data_dir, prompter=prompter, start_worker=False)
    qtbot.addWidget(window)
    window.show()
    window.start()
    qtbot.waitUntil(lambda: "is damaged" in window.message_bar.text(), timeout=30_000)
    text = window.message_bar.text()
    assert "quire restore" in text and str(tmp_path / "backups") in text and ".recover" in text
    assert (data_dir / DB_FILENAME).read_bytes() == before
    window.shutdown()


def test_file_menu_backs_up_and_restores(
    qtbot: QtBot, open_window: WindowFactory, prompter: ScriptedPrompter, data_dir: Path, tmp_path: Path
) -> None:
    quire = open_quire(data_dir)
    try:
        synthetic_base(quire, "Research", files=20, chunks_per_file=2)
        expected = base_content(quire, "Research")
    finally:
        quire.close()
    window = open_window()
    menu = window.backup_menu
    status = window.statusBar()
    prompter.folders = [tmp_path / "backups"]
    menu.backup_action.trigger()
    qtbot.waitUntil(lambda: "Backed up to" in status.currentMessage(), timeout=60_000)
    assert "20 owned files" in status.currentMessage()
    (made,) = [p for p in (tmp_path / "backups").iterdir() if p.name.startswith("quire-backup-")]
    assert not menu.progress.isVisible()

    prompter.folders = [made, tmp_path / "restored"]
    menu.restore_action.trigger()
    qtbot.waitUntil(lambda: "Restored into" in status.currentMessage(), timeout=60_000)
    again = open_quire(tmp_path / "restored")
    try:
        assert base_content(again, "Research") == expected
    finally:
        again.close()

    # an owned copy in the backup turned into a link is refused, and the window says which
    (copy,) = [p for p in (made / "blobs").rglob("*") if p.is_file()][:1]
    copy.unlink()
    copy.symlink_to(tmp_path / "elsewhere")
    prompter.folders = [made, tmp_path / "restored-again"]
    menu.restore_action.trigger()
    qtbot.waitUntil(lambda: "restored-again" in status.currentMessage(), timeout=60_000)
    assert (
        f"1 owned file(s) refused, not copied: the owned copy {copy.parent.name}{copy.name[:10]}"
        in status.currentMessage()
    )


def test_the_window_takes_automatic_backups_when_configured(
    qtbot: QtBot, open_window: WindowFactory, data_dir: Path, tmp_path: Path
) -> None:
    from knowledge.portable.backup import AutoBackup, set_auto_backup

    quire = open_quire(data_dir)
    try:
        synthetic_base(quire, "Research", files=3, chunks_per_file=2)
        set_auto_backup(quire, AutoBackup(str(tmp_path / "auto"), every_hours=0, keep=2))
    finally:
        quire.close()
    window = open_window()
    written: list[str] = []
    window.ctx.message.connect(lambda _level, text: written.append(text) if "Automatic backup" in text else None)
    window.backup_menu.auto_timer.setInterval(50)
    window.backup_menu.auto_timer.start()
    qtbot.waitUntil(lambda: len(written) >= 3, timeout=60_000)
    window.backup_menu.auto_timer.stop()
    qtbot.waitUntil(lambda: not window.backup_menu._auto_running, timeout=30_000)
    assert len(list((tmp_path / "auto").glob("quire-backup-*"))) == 2
