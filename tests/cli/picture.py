#!/usr/bin/env python3
"""Facts about a picture, one "name value" a line, for tests/cli/svg.sh.

    picture.py svg FILE             what an SVG holds (it must parse as XML)
    picture.py png FILE [#RRGGBB...] what a PNG shows: its size, how many
                                    colours, how much is not white, and how
                                    many pixels have each colour asked about

Python's standard library only (xml.etree, zlib, struct): the PNG is decoded
here, so the test needs no imaging package.
"""
import re
import struct
import sys
import xml.etree.ElementTree as ET
import zlib

SVG = "{http://www.w3.org/2000/svg}"
HOLDER = re.compile(r"^client (\d+) holds '.*' from (\d+) to (\d+) ms$")


def local(tag):
    return tag.rsplit("}", 1)[-1]


def svg_facts(path):
    root = ET.parse(path).getroot()
    print("root", root.tag)
    print("width", root.get("width"))
    print("height", root.get("height"))
    title = root.find(SVG + "title")
    print("title", title.text if title is not None else "")
    groups = [g.get("id", "") for g in root.iter(SVG + "g")]
    for kind in ("client", "owner", "panel"):
        print("rows." + kind, sum(1 for g in groups if g.startswith(kind + "-")))
    classes = {}
    external = 0
    for el in root.iter():
        cls = el.get("class")
        if cls:
            classes[cls] = classes.get(cls, 0) + 1
        if local(el.tag) in ("script", "foreignObject", "image", "style", "a", "use"):
            external += 1
        for name, value in el.attrib.items():
            if "href" in name or "url(" in value or "http" in value or "@import" in value:
                external += 1
    for cls in sorted(classes):
        print("class." + cls, classes[cls])
    print("external", external)
    for text in root.iter(SVG + "text"):
        print("text", text.text or "")
    # Each owner row: who held the lock, in order (bars with a tooltip, the
    # ones not merged), and how many of those began before the last ended.
    for g in root.iter(SVG + "g"):
        if not g.get("id", "").startswith("owner-"):
            continue
        holders, overlaps, end = [], 0, None
        for tip in g.iter(SVG + "title"):
            m = HOLDER.match(tip.text or "")
            if not m:
                continue
            holders.append(m.group(1))
            if end is not None and int(m.group(2)) < end:
                overlaps += 1
            end = int(m.group(3))
        print(g.get("id") + ".holders", ",".join(holders))
        print(g.get("id") + ".overlaps", overlaps)


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def png_pixels(path):
    """(width, height, rows of RGB tuples) of an 8-bit RGB or RGBA PNG."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit(path + ": not a PNG")
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace:
        sys.exit("%s: only 8-bit RGB or RGBA, not interlaced (depth %d, colour %d)" % (path, depth, colour))
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    prev = bytearray(stride)
    rows = []
    for y in range(height):
        start = y * (stride + 1)
        kind = raw[start]
        line = bytearray(raw[start + 1 : start + 1 + stride])
        if kind == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif kind == 2:
            line = bytearray((a + b) & 0xFF for a, b in zip(line, prev))
        elif kind == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif kind == 4:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                up_left = prev[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + paeth(left, prev[i], up_left)) & 0xFF
        rows.append(line)
        prev = line
    pixels = []
    for line in rows:
        pixels.extend(zip(line[0::bpp], line[1::bpp], line[2::bpp]))
    return width, height, pixels


def png_facts(path, wanted):
    width, height, pixels = png_pixels(path)
    counts = {}
    for p in pixels:
        counts[p] = counts.get(p, 0) + 1
    print("width", width)
    print("height", height)
    print("colours", len(counts))
    white = counts.get((255, 255, 255), 0)
    print("nonwhite", (len(pixels) - white) * 1000 // max(len(pixels), 1))
    for hexcolour in wanted:
        r, g, b = (int(hexcolour[i : i + 2], 16) for i in (1, 3, 5))
        near = sum(
            n for (pr, pg, pb), n in counts.items() if abs(pr - r) <= 4 and abs(pg - g) <= 4 and abs(pb - b) <= 4
        )
        print("colour", hexcolour, near)


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("svg", "png"):
        sys.exit(__doc__)
    if sys.argv[1] == "svg":
        svg_facts(sys.argv[2])
    else:
        png_facts(sys.argv[2], sys.argv[3:])
