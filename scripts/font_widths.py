"""Write ``training_clusters/diagram/font_widths.json``: the advance widths of the glyphs a drawing uses, read
from the TrueType files of DejaVu Sans (the font the PNG is rasterized with, and wider than the Helvetica or
Arial a browser draws the SVG with), so :mod:`training_clusters.diagram.text` sizes every box for it.

    python scripts/font_widths.py [--check] [REGULAR.ttf BOLD.ttf]

Default files: Debian's and Ubuntu's ``fonts-dejavu-core`` paths. ``--check`` compares instead of writing
(exit 1 when they differ). The table is small and checked in, so drawing never needs the font installed.
"""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "training_clusters" / "diagram" / "font_widths.json"
FONTS = (
    Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"),
    Path("/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"),
)
#: Printable ASCII, and the few other characters the drawings write.
CHARACTERS = (
    "".join(chr(c) for c in range(32, 127)) + "\N{MULTIPLICATION SIGN}\N{EN DASH}\N{HORIZONTAL ELLIPSIS}"
)


def advance_widths(path: Path, characters: str) -> dict[str, float]:
    """Each character's advance width in ems (TrueType ``cmap`` format 4, ``hmtx``)."""
    data = path.read_bytes()
    (count,) = struct.unpack_from(">H", data, 4)
    tables = {}
    for index in range(count):
        tag, _, offset, _ = struct.unpack_from(">4sIII", data, 12 + 16 * index)
        tables[tag.decode("latin-1")] = offset
    (units_per_em,) = struct.unpack_from(">H", data, tables["head"] + 18)
    (metrics,) = struct.unpack_from(">H", data, tables["hhea"] + 34)
    glyph = _cmap(data, tables["cmap"])
    widths = {}
    for character in characters:
        index = min(glyph(ord(character)), metrics - 1)
        (advance,) = struct.unpack_from(">H", data, tables["hmtx"] + 4 * index)
        widths[character] = round(advance / units_per_em, 4)
    return widths


def _cmap(data: bytes, cmap: int):  # type: ignore[no-untyped-def]
    (_, count) = struct.unpack_from(">HH", data, cmap)
    for index in range(count):
        platform, encoding, offset = struct.unpack_from(">HHI", data, cmap + 4 + 8 * index)
        table = cmap + offset
        if (platform, encoding) == (3, 1) and struct.unpack_from(">H", data, table)[0] == 4:
            break
    else:
        raise SystemExit("no Unicode BMP cmap (format 4)")
    (segments_x2,) = struct.unpack_from(">H", data, table + 6)
    segments = segments_x2 // 2
    ends = struct.unpack_from(f">{segments}H", data, table + 14)
    starts_at = table + 16 + segments_x2
    starts = struct.unpack_from(f">{segments}H", data, starts_at)
    deltas = struct.unpack_from(f">{segments}h", data, starts_at + segments_x2)
    ranges_at = starts_at + 2 * segments_x2
    ranges = struct.unpack_from(f">{segments}H", data, ranges_at)

    def glyph(code: int) -> int:
        for segment in range(segments):
            if starts[segment] <= code <= ends[segment]:
                if ranges[segment] == 0:
                    return (code + deltas[segment]) % 65536
                at = ranges_at + 2 * segment + ranges[segment] + 2 * (code - starts[segment])
                (found,) = struct.unpack_from(">H", data, at)
                return (found + deltas[segment]) % 65536 if found else 0
        return 0

    return glyph


def table(regular: Path, bold: Path) -> dict[str, object]:
    return {
        "font": "DejaVu Sans",
        "source": "fonts-dejavu-core (DejaVuSans.ttf, DejaVuSans-Bold.ttf), advance widths in ems",
        "regular": advance_widths(regular, CHARACTERS),
        "bold": advance_widths(bold, CHARACTERS),
    }


def main(argv: list[str]) -> int:
    check = "--check" in argv
    paths = [Path(a) for a in argv if a != "--check"] or list(FONTS)
    text = json.dumps(table(*paths), indent=1, ensure_ascii=False, sort_keys=True) + "\n"
    if check:
        same = TABLE.read_text(encoding="utf-8") == text
        print("font_widths.json is current" if same else "font_widths.json differs from the fonts")
        return 0 if same else 1
    TABLE.write_text(text, encoding="utf-8")
    print(f"wrote {TABLE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
