#!/bin/sh
# Adds Quire to this user's application menu: the desktop entry (pointing at this folder's Quire) and
# its icon. Run it from the unpacked folder; run it again after moving the folder. Removes nothing.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
apps="${XDG_DATA_HOME:-$HOME/.local/share}/applications"
icons="${XDG_DATA_HOME:-$HOME/.local/share}/icons/hicolor/scalable/apps"
mkdir -p "$apps" "$icons"
cp "$here/quire.svg" "$icons/quire.svg"
sed "s|^Exec=.*|Exec=\"$here/Quire\"|" "$here/quire.desktop" > "$apps/quire.desktop"
command -v update-desktop-database >/dev/null 2>&1 && update-desktop-database "$apps" || true
echo "Quire added to the application menu ($apps/quire.desktop)"
