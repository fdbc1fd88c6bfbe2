#!/usr/bin/env bash
# Makes the Linux distributable from a built onedir folder: one .tar.zst holding the folder, with the
# desktop entry, the icon and the script that installs both into the user's menu beside the executable.
#   packaging/linux/archive.sh dist/Quire dist/Quire-linux-x86_64.tar.zst
set -euo pipefail
folder=$1
archive=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
test -x "$folder/Quire" || { echo "archive: $folder/Quire is missing (run the PyInstaller build first)" >&2; exit 1; }
cp "$root/resources/quire.desktop" "$root/resources/quire.svg" "$folder/"
cp "$root/packaging/linux/install-desktop-entry.sh" "$folder/"
cp "$root/packaging/linux/README.txt" "$folder/"
rm -f "$archive"
tar -C "$(dirname "$folder")" --sort=name --owner=0 --group=0 --numeric-owner -cf - "$(basename "$folder")" \
  | zstd -q -T0 -12 -o "$archive"
