"""A minimal reader and writer of sketch files (`LDPP` v1 around an `LDPC` v5 state body),
for tests that craft bytes the package itself never writes: two sections for one stream,
a sketch of another shape. Checksums are recomputed, so the decoder meets the content."""

from __future__ import annotations

import json
import struct
from typing import Any, Dict, List, Tuple


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def take(self, n: int) -> bytes:
        out = self.data[self.at : self.at + n]
        assert len(out) == n
        self.at += n
        return out

    def u8(self) -> int:
        return self.take(1)[0]

    def u32(self) -> int:
        return struct.unpack("<I", self.take(4))[0]

    def u64(self) -> int:
        return struct.unpack("<Q", self.take(8))[0]

    def i64(self) -> int:
        return struct.unpack("<q", self.take(8))[0]

    def opt(self):
        flag, value = self.u8(), self.i64()
        return value if flag else None

    def string(self) -> str:
        return self.take(self.u32()).decode()

    def grouped(self) -> List[Tuple[List[Any], bytes]]:
        out = []
        for _ in range(self.u32()):
            key = []
            for _ in range(self.u32()):
                present, value = self.u8(), self.string()
                key.append(value if present else None)
            out.append((key, self.take(self.u32())))
        return out


def parse(data: bytes) -> Tuple[Dict[str, Any], int, List[Dict[str, Any]]]:
    """The header, the state version and the streams of a sketch file."""
    assert data[:4] == b"LDPP" and data[4] == 1
    (header_len,) = struct.unpack_from("<I", data, 5)
    header = json.loads(data[9 : 9 + header_len])
    body = data[9 + header_len : -4]
    assert body[:4] == b"LDPC"
    r = _Reader(body[5:-4])
    streams = []
    for _ in range(r.u32()):
        s: Dict[str, Any] = {"name": r.string(), "pane_width": r.i64(), "max_event": r.opt(), "late": r.u64()}
        s["finalized"], s["first_pane"] = r.opt(), r.opt()
        s["positions"] = [(r.string(), r.u64()) for _ in range(r.u32())]
        s["retired"] = r.grouped()
        s["panes"] = [(r.i64(), r.grouped()) for _ in range(r.u32())]
        s["ledger_flag"], s["ledger"] = r.u8(), r.string()
        s["settings"] = [(r.string(), r.string()) for _ in range(r.u32())]
        s["latches"] = r.string()
        streams.append(s)
    return header, body[4], streams


def _str(text: str) -> bytes:
    b = text.encode()
    return struct.pack("<I", len(b)) + b


def _opt(value) -> bytes:
    return struct.pack("<Bq", 0 if value is None else 1, 0 if value is None else value)


def _grouped(groups) -> bytes:
    out = struct.pack("<I", len(groups))
    for key, sketch in groups:
        out += struct.pack("<I", len(key))
        for v in key:
            out += struct.pack("<B", 0 if v is None else 1) + _str(v or "")
        out += struct.pack("<I", len(sketch)) + sketch
    return out


def write(header: Dict[str, Any], version: int, streams: List[Dict[str, Any]]) -> bytes:
    """A sketch file of `streams`, checksums recomputed."""
    body = b"LDPC" + bytes([version]) + struct.pack("<I", len(streams))
    for s in streams:
        body += _str(s["name"]) + struct.pack("<q", s["pane_width"]) + _opt(s["max_event"])
        body += struct.pack("<Q", s["late"]) + _opt(s["finalized"]) + _opt(s["first_pane"])
        body += struct.pack("<I", len(s["positions"]))
        body += b"".join(_str(k) + struct.pack("<Q", v) for k, v in s["positions"])
        body += _grouped(s["retired"])
        body += struct.pack("<I", len(s["panes"]))
        body += b"".join(struct.pack("<q", start) + _grouped(g) for start, g in s["panes"])
        body += bytes([s["ledger_flag"]]) + _str(s["ledger"])
        body += struct.pack("<I", len(s["settings"]))
        body += b"".join(_str(k) + _str(v) for k, v in s["settings"])
        body += _str(s["latches"])
    body += struct.pack("<I", crc32c(body))
    h = json.dumps(header, separators=(",", ":")).encode()
    out = b"LDPP" + bytes([1]) + struct.pack("<I", len(h)) + h + body
    return out + struct.pack("<I", crc32c(out))


def counts_sketch(counts: List[int], n=None) -> bytes:
    """A category-count sketch (`LDPS` v2, kind 1) of `counts`, `n` their sum by default."""
    n = sum(counts) if n is None else n
    reasons = 13
    return (b"LDPS" + bytes([2, 1]) + struct.pack("<IQ", len(counts), n)
            + b"".join(struct.pack("<Q", c) for c in counts) + bytes([reasons]) + b"\0" * (8 * reasons))
