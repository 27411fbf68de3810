#!/usr/bin/env python3
"""Writes crates/sql/src/engine/expr/case_table.rs: MariaDB's UPPER and
LOWER of every character of the Basic Multilingual Plane, read from a
running MariaDB 10.11 (its socket the first argument, /tmp/mdb.sock by
default), the characters that map to another kept."""
import os
import sys

import pymysql

SOCKET = sys.argv[1] if len(sys.argv) > 1 else '/tmp/mdb.sock'
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'crates', 'sql', 'src',
                   'engine', 'expr', 'case_table.rs')
c = pymysql.connect(unix_socket=SOCKET, user='root', charset='utf8mb4')
cur = c.cursor()
rows = []
for page in range(0x100):
    if 0xD8 <= page <= 0xDF: continue
    chars = [chr(page*256+i) for i in range(256) if page*256+i != 0]
    s = ''.join(chars)
    cur.execute("select upper(%s), lower(%s)", (s, s))
    up, lo = cur.fetchone()
    assert len(up) == len(s) and len(lo) == len(s)
    for ch, u, l in zip(s, up, lo):
        if u != ch or l != ch:
            rows.append((ord(ch), ord(u), ord(l)))
# Past the plane MariaDB maps nothing (case_table.rs's tests say so).
print(len(rows), 'characters')
out = []
out.append("//! MariaDB's case mapping of utf8mb4 (UPPER, LOWER, and what a")
out.append("//! case-insensitive LOCATE folds): one character for one, in the Basic")
out.append("//! Multilingual Plane only, from an older Unicode than Rust's (`ß` and")
out.append("//! `ﬁ` stay as they are, Georgian and Cherokee are not mapped, `ᾳ` is")
out.append("//! `ᾼ`). Generated from MariaDB 10.11's answers to UPPER and LOWER of")
out.append("//! every character of the plane (`tests/sql/case_table.py`); a character not")
out.append("//! listed maps to itself. Facts of MariaDB's tables, not its code.")
out.append("")
out.append("/// (character, its uppercase, its lowercase), by character.")
out.append("#[rustfmt::skip]")
out.append("pub(crate) const CASES: &[(u16, u16, u16)] = &[")
line = "   "
for r in rows:
    item = " (0x%04X, 0x%04X, 0x%04X)," % r
    if len(line) + len(item) > 99:
        out.append(line)
        line = "   "
    line += item
out.append(line)
out.append("];")
tests = open(OUT).read().split('\n#[cfg(test)]', 1)
kept = '\n#[cfg(test)]' + tests[1] if len(tests) > 1 else ''
open(OUT, 'w').write('\n'.join(out) + '\n' + kept)
