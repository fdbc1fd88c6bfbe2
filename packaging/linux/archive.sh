#!/usr/bin/env bash
# Makes the Linux distributables from the built folders: the app's archive (the onedir folder with the desktop
# entry, the icon and the script that installs both into the user's menu) and, when its folder was built, the
# multilingual model's add-on archive (its folder, unpacked beside the app's).
#   packaging/linux/archive.sh dist/Quire dist/Quire-linux-x86_64.tar.xz \
#     [dist/Quire-multilingual dist/Quire-multilingual-linux-x86_64.tar.xz]
# xz -9e: on the app's folder (430 MB) it measured 154 MB against 164 MB for zstd -19 --long=27 and 182 MB for
# zstd -12, in about the time zstd -19 takes (10 min on two loaded cores); `tar -xf` unpacks it where zstd is not
# installed, which is most desktops.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)

pack() {  # folder archive
  rm -f "$2"
  tar -C "$(dirname "$1")" --sort=name --owner=0 --group=0 --numeric-owner -cf - "$(basename "$1")" \
    | xz -q -9e -T0 > "$2"
}

folder=$1
archive=$2
test -x "$folder/Quire" || { echo "archive: $folder/Quire is missing (run the PyInstaller build first)" >&2; exit 1; }
cp "$root/resources/quire.desktop" "$root/resources/quire.svg" "$folder/"
cp "$root/packaging/linux/install-desktop-entry.sh" "$folder/"
cp "$root/packaging/linux/README.txt" "$folder/"
pack "$folder" "$archive"
if [ $# -ge 4 ]; then
  test -d "$3" || { echo "archive: the add-on folder $3 is missing" >&2; exit 1; }
  pack "$3" "$4"
fi
