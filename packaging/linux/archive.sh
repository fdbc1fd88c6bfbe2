#!/usr/bin/env bash
# Makes the Linux distributables from the built folders: the app's archive (the onedir folder with the desktop
# entry, the icon and the script that installs both into the user's menu) and, when its folder was built, the
# multilingual model's add-on archive (its folder, unpacked beside the app's).
#   packaging/linux/archive.sh dist/Quire dist/Quire-linux-x86_64.tar.xz \
#     [dist/Quire-multilingual dist/Quire-multilingual-linux-x86_64.tar.xz]
# xz, which `tar -xf` unpacks where zstd is not installed (most desktops); xz -9e once measured 154 MB against
# 164 MB for zstd -19 --long=27. The preset is the fastest that keeps the archive under its 150 MB target, measured
# on the same 404 MB folder in one run (two cores, loaded): -9e 143.7 MB in 809 s (its 192 MB blocks leave xz one
# thread), -9 143.7 MB in 518 s, -7 146.0 MB in 246 s (both threads busy). The add-on (72 MB, mostly model weights
# that do not compress) is the same 65.0 MB at -6 in half the time of -9e.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)

pack() {  # folder archive preset
  rm -f "$2"
  tar -C "$(dirname "$1")" --sort=name --owner=0 --group=0 --numeric-owner -cf - "$(basename "$1")" \
    | xz -q "$3" -T0 > "$2"
}

folder=$1
archive=$2
test -x "$folder/Quire" || { echo "archive: $folder/Quire is missing (run the PyInstaller build first)" >&2; exit 1; }
cp "$root/resources/quire.desktop" "$root/resources/quire.svg" "$folder/"
cp "$root/packaging/linux/install-desktop-entry.sh" "$folder/"
cp "$root/packaging/linux/README.txt" "$folder/"
pack "$folder" "$archive" -7
if [ $# -ge 4 ]; then
  test -d "$3" || { echo "archive: the add-on folder $3 is missing" >&2; exit 1; }
  pack "$3" "$4" -6
fi
