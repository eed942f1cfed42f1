import struct
import zlib

from memlane.bench.plot import Canvas, line_chart


def test_line_chart_is_a_valid_png_of_the_asked_size():
    png = line_chart([("a", [1, 2, 3], [10, 20, 15]), ("b", [1, 2, 3], [5, 5, 5])], title="t", x_label="x",
                     y_label="y", width=320, height=200)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    length, kind = struct.unpack(">I4s", png[8:16])
    assert kind == b"IHDR" and struct.unpack(">II", png[16:24]) == (320, 200)
    assert zlib.crc32(png[12:16 + length]) & 0xFFFFFFFF == struct.unpack(">I", png[16 + length:20 + length])[0]
    assert png.endswith(b"IEND\xaeB`\x82")


def test_canvas_draws_lines_and_text():
    c = Canvas(20, 10)
    c.line(0, 0, 19, 9, (255, 0, 0))
    assert c.pixels[0:3] == bytes((255, 0, 0)) and c.pixels[-3:] == bytes((255, 0, 0))
    end = c.text(0, 0, "A1", scale=1)
    assert end == 12
