#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A hostile NBD client: malformed handshakes, bad requests and abandoned
connections against vb-nbd-file-server on a unix socket. Each check asserts
one concrete outcome (an error code, a closed connection, data that did or
did not change). Valid writes go only to the last MiB of the export, so the
caller can checksum everything before it. Standard library only."""

import argparse
import os
import socket
import struct
import sys
import time

NBD_MAGIC = 0x4E42444D41474943
NBD_OPTS_MAGIC = 0x49484156454F5054
NBD_REP_MAGIC = 0x0003E889045565A9
NBD_REQUEST_MAGIC = 0x25609513
NBD_SIMPLE_REPLY_MAGIC = 0x67446698
NBD_STRUCTURED_REPLY_MAGIC = 0x668E33EF

C_FIXED_NEWSTYLE = 1
C_NO_ZEROES = 2

OPT_EXPORT_NAME = 1
OPT_ABORT = 2
OPT_LIST = 3
OPT_STARTTLS = 5
OPT_INFO = 6
OPT_GO = 7
OPT_STRUCTURED_REPLY = 8

REP_ACK = 1
REP_SERVER = 2
REP_INFO = 3
REP_ERR_UNSUP = (1 << 31) + 1
REP_ERR_INVALID = (1 << 31) + 3
REP_ERR_UNKNOWN = (1 << 31) + 6

INFO_EXPORT = 0
INFO_NAME = 1
INFO_BLOCK_SIZE = 3

CMD_READ = 0
CMD_WRITE = 1
CMD_DISC = 2
CMD_FLUSH = 3
CMD_TRIM = 4
CMD_WRITE_ZEROES = 6
CMD_FLAG_FUA = 1

REPLY_FLAG_DONE = 1
REPLY_TYPE_NONE = 0
REPLY_TYPE_OFFSET_DATA = 1
REPLY_TYPE_ERROR = (1 << 15) + 1

EPERM = 1
EINVAL = 22
ENOSPC = 28

MiB = 1 << 20


class Closed(Exception):
    pass


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)


class Client:
    def __init__(self, path, timeout=10.0):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(path)
        self.cookie = 0

    def close(self):
        self.s.close()

    def send(self, data):
        self.s.sendall(data)

    def recv(self, n):
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            try:
                r = self.s.recv_into(view[got:])
            except ConnectionResetError:
                raise Closed()
            if r == 0:
                raise Closed()
            got += r
        return bytes(buf)

    def expect_closed(self, what):
        """The server must close: EOF (or a reset) within the timeout, after
        at most a little data it had already queued."""
        try:
            for _ in range(64):
                chunk = self.s.recv(65536)
                if not chunk:
                    return
        except ConnectionResetError:
            return
        except socket.timeout:
            raise Fail(what + ": connection still open")
        raise Fail(what + ": server kept sending")

    # -- handshake --
    def greeting(self, flags=C_FIXED_NEWSTYLE | C_NO_ZEROES):
        magic, opts, hflags = struct.unpack(">QQH", self.recv(18))
        check(magic == NBD_MAGIC and opts == NBD_OPTS_MAGIC, "greeting magic")
        check(hflags == 3, "handshake flags FIXED_NEWSTYLE|NO_ZEROES (got %#x)" % hflags)
        if flags is not None:
            self.send(struct.pack(">I", flags))

    def option(self, opt, data=b""):
        self.send(struct.pack(">QII", NBD_OPTS_MAGIC, opt, len(data)) + data)

    def reply(self, opt):
        magic, ropt, rtype, length = struct.unpack(">QIII", self.recv(20))
        check(magic == NBD_REP_MAGIC, "option reply magic")
        check(ropt == opt, "option reply for option %d (got %d)" % (opt, ropt))
        return rtype, self.recv(length)

    def go(self, name=b"", structured=False, opt=OPT_GO):
        if structured:
            self.option(OPT_STRUCTURED_REPLY)
            rtype, _ = self.reply(OPT_STRUCTURED_REPLY)
            check(rtype == REP_ACK, "STRUCTURED_REPLY acknowledged")
        self.structured = structured
        infos = [INFO_NAME, INFO_BLOCK_SIZE]
        self.option(opt, struct.pack(">I", len(name)) + name +
                    struct.pack(">H", len(infos)) + b"".join(struct.pack(">H", i) for i in infos))
        got = {}
        while True:
            rtype, data = self.reply(opt)
            if rtype != REP_INFO:
                break
            (itype,) = struct.unpack(">H", data[:2])
            got[itype] = data[2:]
        check(rtype == REP_ACK, "GO/INFO ends with ACK (got %#x)" % rtype)
        check(INFO_EXPORT in got, "INFO_EXPORT sent")
        self.size, self.tflags = struct.unpack(">QH", got[INFO_EXPORT])
        if INFO_BLOCK_SIZE in got:
            self.bsizes = struct.unpack(">III", got[INFO_BLOCK_SIZE])
        return got

    # -- transmission --
    def request(self, cmd, offset, length, flags=0, payload=b""):
        self.cookie += 1
        self.send(struct.pack(">IHHQQI", NBD_REQUEST_MAGIC, flags, cmd, self.cookie,
                              offset, length) + payload)
        return self.cookie

    def simple_reply(self, cookie, data_len=0):
        magic, err, rcookie = struct.unpack(">IIQ", self.recv(16))
        check(magic == NBD_SIMPLE_REPLY_MAGIC, "simple reply magic (got %#x)" % magic)
        check(rcookie == cookie, "reply cookie")
        data = self.recv(data_len) if err == 0 and data_len else b""
        return err, data

    def structured_reply(self, cookie):
        """Returns (error, {offset: data}) after the chunk marked DONE."""
        err, pieces = 0, {}
        while True:
            magic, flags, rtype, rcookie, length = struct.unpack(">IHHQI", self.recv(20))
            check(magic == NBD_STRUCTURED_REPLY_MAGIC, "structured reply magic (%#x)" % magic)
            check(rcookie == cookie, "structured reply cookie")
            payload = self.recv(length)
            if rtype == REPLY_TYPE_OFFSET_DATA:
                (off,) = struct.unpack(">Q", payload[:8])
                pieces[off] = payload[8:]
            elif rtype == REPLY_TYPE_ERROR:
                err, mlen = struct.unpack(">IH", payload[:6])
                check(mlen == len(payload) - 6, "error message length")
            else:
                check(rtype == REPLY_TYPE_NONE and length == 0, "chunk type %d" % rtype)
            if flags & REPLY_FLAG_DONE:
                return err, pieces

    def cmd(self, cmd, offset, length, flags=0, payload=b""):
        """Any command; returns (error, data for READ)."""
        cookie = self.request(cmd, offset, length, flags, payload)
        if self.structured:
            err, pieces = self.structured_reply(cookie)
            data = b"".join(pieces[k] for k in sorted(pieces))
            if err == 0 and cmd == CMD_READ:
                check(len(data) == length, "structured read returned %d of %d bytes"
                      % (len(data), length))
            return err, data
        return self.simple_reply(cookie, length if cmd == CMD_READ else 0)


def file_bytes(path, offset, length):
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read(length)


class Hostile:
    def __init__(self, args):
        self.args = args
        self.path = args.socket
        self.file = args.file
        self.size = os.path.getsize(args.file)
        self.bs = args.block_size
        self.passed = 0
        self.failed = 0

    def connect(self, **kw):
        return Client(self.path, **kw)

    def session(self, structured=False):
        c = self.connect()
        c.greeting()
        c.go(structured=structured)
        return c

    def run(self, name, fn):
        try:
            fn()
        except (Fail, Closed, OSError, struct.error) as e:
            self.failed += 1
            print("not ok - %s: %s: %s" % (name, type(e).__name__, e))
            return
        self.passed += 1
        print("ok - %s" % name)

    # ---- handshake ----
    def t_garbage(self):
        c = self.connect()
        c.greeting(flags=None)
        c.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" * 4)
        c.expect_closed("HTTP garbage instead of client flags")

    def t_unknown_client_flags(self):
        c = self.connect()
        c.greeting(flags=C_FIXED_NEWSTYLE | (1 << 7))
        c.expect_closed("unknown client flag")

    def t_wrong_option_magic(self):
        c = self.connect()
        c.greeting()
        c.send(struct.pack(">QII", 0x1122334455667788, OPT_GO, 0))
        c.expect_closed("option with wrong magic")

    def t_huge_option(self):
        c = self.connect()
        c.greeting()
        c.send(struct.pack(">QII", NBD_OPTS_MAGIC, OPT_GO, 0xFFFFFFFF) + b"\0" * 4096)
        t0 = time.monotonic()
        c.expect_closed("option length 0xffffffff")
        check(time.monotonic() - t0 < 5, "closed promptly")

    def t_unknown_option_then_go(self):
        c = self.connect()
        c.greeting()
        c.option(0x7FFF1234, b"some data the server must skip")
        rtype, _ = c.reply(0x7FFF1234)
        check(rtype == REP_ERR_UNSUP, "unknown option -> NBD_REP_ERR_UNSUP (got %#x)" % rtype)
        c.option(OPT_STARTTLS)
        rtype, _ = c.reply(OPT_STARTTLS)
        check(rtype == REP_ERR_UNSUP, "STARTTLS refused with NBD_REP_ERR_UNSUP (got %#x)" % rtype)
        c.option(OPT_LIST, b"x")
        rtype, _ = c.reply(OPT_LIST)
        check(rtype == REP_ERR_INVALID, "LIST with data -> NBD_REP_ERR_INVALID")
        c.option(OPT_LIST)
        rtype, data = c.reply(OPT_LIST)
        check(rtype == REP_SERVER, "LIST gives NBD_REP_SERVER")
        (nlen,) = struct.unpack(">I", data[:4])
        want = self.args.export_name.encode()
        check(data[4:4 + nlen] == want, "LIST names the export %r (got %r)" % (want, data[4:4 + nlen]))
        rtype, _ = c.reply(OPT_LIST)
        check(rtype == REP_ACK, "LIST ends with ACK")
        # An option of a sane length but not understood is skipped, too.
        c.option(0x55, b"\xaa" * 60000)
        rtype, _ = c.reply(0x55)
        check(rtype == REP_ERR_UNSUP, "60 kB unknown option -> NBD_REP_ERR_UNSUP")
        got = c.go(opt=OPT_INFO)
        check(c.size == self.size, "INFO export size %d (got %d)" % (self.size, c.size))
        check(c.bsizes == (self.bs, max(4096, self.bs), 32 * MiB),
              "block size constraints (got %r)" % (c.bsizes,))
        check(got.get(INFO_NAME) == self.args.export_name.encode(), "INFO_NAME is the canonical name %r" % self.args.export_name)
        c.go()
        err, data = c.cmd(CMD_READ, 0, 4096)
        check(err == 0 and data == file_bytes(self.file, 0, 4096), "read after GO matches the file")
        c.request(CMD_DISC, 0, 0)
        c.expect_closed("NBD_CMD_DISC")

    def t_unknown_export(self):
        c = self.connect()
        c.greeting()
        name = b"no-such-export"
        c.option(OPT_GO, struct.pack(">I", len(name)) + name + struct.pack(">H", 0))
        rtype, _ = c.reply(OPT_GO)
        check(rtype == REP_ERR_UNKNOWN, "GO unknown name -> NBD_REP_ERR_UNKNOWN (got %#x)" % rtype)
        long_name = b"n" * 5000
        c.option(OPT_GO, struct.pack(">I", len(long_name)) + long_name + struct.pack(">H", 0))
        rtype, _ = c.reply(OPT_GO)
        check(rtype == REP_ERR_INVALID, "GO with a 5000-byte name -> NBD_REP_ERR_INVALID")
        c.option(OPT_GO, struct.pack(">I", 1000) + b"short")
        rtype, _ = c.reply(OPT_GO)
        check(rtype == REP_ERR_INVALID, "GO with a name length past the data -> INVALID")
        c.go()  # still usable
        err, _ = c.cmd(CMD_FLUSH, 0, 0)
        check(err == 0, "flush after the refused GOs")

    def t_export_name_unknown(self):
        c = self.connect()
        c.greeting()
        c.option(OPT_EXPORT_NAME, b"nope")
        c.expect_closed("NBD_OPT_EXPORT_NAME with an unknown name")

    def t_export_name_zeroes(self):
        for flags, reply_len in ((C_FIXED_NEWSTYLE, 10 + 124), (C_FIXED_NEWSTYLE | C_NO_ZEROES, 10),
                                 (0, 10 + 124)):
            c = self.connect()
            c.greeting(flags=flags)
            c.option(OPT_EXPORT_NAME, b"")
            data = c.recv(reply_len)
            size, tflags = struct.unpack(">QH", data[:10])
            check(size == self.size, "EXPORT_NAME size")
            check(data[10:] == b"\0" * (reply_len - 10), "zero padding as negotiated")
            c.structured = False
            err, got = c.cmd(CMD_READ, 4096, 4096)
            check(err == 0 and got == file_bytes(self.file, 4096, 4096),
                  "read right after EXPORT_NAME (client flags %d)" % flags)
            c.close()

    def t_plain_newstyle_other_option(self):
        c = self.connect()
        c.greeting(flags=0)  # not fixed newstyle: only EXPORT_NAME exists
        c.option(OPT_LIST)
        c.expect_closed("NBD_OPT_LIST from a non-fixed newstyle client")

    def t_abort(self):
        c = self.connect()
        c.greeting()
        c.option(OPT_ABORT)
        rtype, _ = c.reply(OPT_ABORT)
        check(rtype == REP_ACK, "ABORT acknowledged")
        c.expect_closed("after NBD_OPT_ABORT")

    # ---- transmission ----
    def t_beyond_end(self, structured):
        c = self.session(structured)
        err, _ = c.cmd(CMD_READ, self.size, 4096)
        check(err == EINVAL, "read at the end -> EINVAL (got %d)" % err)
        err, _ = c.cmd(CMD_READ, self.size - 4096, 8192)
        check(err == EINVAL, "read straddling the end -> EINVAL (got %d)" % err)
        err, _ = c.cmd(CMD_READ, (1 << 64) - 4096, 8192)
        check(err == EINVAL, "read whose end wraps past 2^64 -> EINVAL (got %d)" % err)
        err, _ = c.cmd(CMD_TRIM, self.size - 4096, 8192)
        check(err == EINVAL, "trim past the end -> EINVAL (got %d)" % err)
        err, _ = c.cmd(CMD_WRITE, self.size, 4096, payload=b"\xee" * 4096)
        check(err == ENOSPC, "write past the end -> ENOSPC (got %d)" % err)
        err, _ = c.cmd(CMD_WRITE_ZEROES, self.size - 512, 1024)
        check(err == ENOSPC, "write-zeroes past the end -> ENOSPC (got %d)" % err)
        err, data = c.cmd(CMD_READ, self.size - 4096, 4096)
        check(err == 0 and data == file_bytes(self.file, self.size - 4096, 4096),
              "connection still usable: last block reads back")

    def t_unaligned(self, structured):
        c = self.session(structured)
        if self.bs == 1:
            return
        err, _ = c.cmd(CMD_READ, 1, self.bs)
        check(err == EINVAL, "unaligned read offset -> EINVAL (got %d)" % err)
        err, _ = c.cmd(CMD_READ, 0, self.bs + 1)
        check(err == EINVAL, "unaligned read length -> EINVAL (got %d)" % err)
        before = file_bytes(self.file, 0, 2 * self.bs)
        err, _ = c.cmd(CMD_WRITE, 0, 100, payload=b"\xee" * 100)
        check(err == EINVAL, "unaligned write -> EINVAL (got %d)" % err)
        err, _ = c.cmd(CMD_WRITE_ZEROES, self.bs // 2, self.bs)
        check(err == EINVAL, "unaligned write-zeroes -> EINVAL (got %d)" % err)
        err, data = c.cmd(CMD_READ, 0, 2 * self.bs)
        check(err == 0 and data == before, "refused writes left the data alone, payload skipped")

    def t_bad_commands(self, structured):
        c = self.session(structured)
        err, _ = c.cmd(42, 0, 4096)
        check(err == EINVAL, "unknown command -> EINVAL (got %d)" % err)
        # A non-write command's length is not a payload: nothing to skip.
        err, _ = c.cmd(99, 0, 0xFFFFFFFF)
        check(err == EINVAL, "unknown command with a 4 GiB length -> EINVAL (got %d)" % err)
        err, _ = c.cmd(CMD_READ, 0, 4096, flags=1 << 7)
        check(err == EINVAL, "read with an unknown flag -> EINVAL (got %d)" % err)
        err, _ = c.cmd(CMD_READ, 0, 1 << 30)
        check(err == EINVAL, "1 GiB read -> EINVAL (got %d)" % err)
        err, _ = c.cmd(CMD_READ, 0, 32 * MiB + self.bs)
        check(err == EINVAL, "read just over 32 MiB -> EINVAL (got %d)" % err)
        err, data = c.cmd(CMD_READ, 0, 32 * MiB)
        check(err == 0 and data == file_bytes(self.file, 0, 32 * MiB),
              "a 32 MiB read (the maximum) matches the file")
        err, _ = c.cmd(CMD_READ, 0, 0)
        check(err == 0, "zero-length read succeeds")

    def t_valid_writes(self, structured):
        """Writes in the last MiB: they land, with FUA, zeroes and trim."""
        c = self.session(structured)
        base = self.size - MiB
        pattern = bytes((i * 7 + (structured and 3)) & 0xFF for i in range(256 * 1024))
        err, _ = c.cmd(CMD_WRITE, base, len(pattern), flags=CMD_FLAG_FUA, payload=pattern)
        check(err == 0, "FUA write in the last MiB (got %d)" % err)
        check(file_bytes(self.file, base, len(pattern)) == pattern, "the write is in the file")
        err, _ = c.cmd(CMD_WRITE_ZEROES, base + 64 * 1024, 64 * 1024, flags=2)  # NO_HOLE
        check(err == 0, "write-zeroes with NO_HOLE")
        err, _ = c.cmd(CMD_TRIM, base + 512 * 1024, 64 * 1024)
        check(err == 0, "trim")
        err, _ = c.cmd(CMD_FLUSH, 0, 0)
        check(err == 0, "flush")
        expect = pattern[:64 * 1024] + b"\0" * 64 * 1024 + pattern[128 * 1024:]
        err, data = c.cmd(CMD_READ, base, len(pattern))
        check(err == 0 and data == expect, "read back: pattern with a zeroed hole")

    def t_huge_write(self):
        c = self.session()
        c.request(CMD_WRITE, 0, 0xFFFFFFFF)
        try:
            c.send(b"\xee" * 65536)
        except OSError:
            pass
        c.expect_closed("write announcing a 4 GiB payload")

    def t_bad_request_magic(self):
        c = self.session()
        c.send(struct.pack(">IHHQQI", 0xDEADBEEF, 0, CMD_READ, 1, 0, 4096))
        c.expect_closed("request with a bad magic")

    def t_disc(self):
        c = self.session()
        c.request(CMD_DISC, 0, 0)
        c.expect_closed("disconnect request")

    # ---- resources ----
    def t_abandoned(self):
        # Two waves of 50, each held open at once (below the cap of 64),
        # dropped at three different points of the handshake.
        for wave in range(2):
            socks = []
            for i in range(50):
                c = self.connect()
                if i % 3 == 1:
                    c.recv(18)
                elif i % 3 == 2:
                    c.greeting()
                    c.send(struct.pack(">QII", NBD_OPTS_MAGIC, OPT_GO, 100) + b"\0" * 10)
                socks.append(c)
            for c in socks:
                c.close()
            time.sleep(0.5)
        c = self.session()
        err, _ = c.cmd(CMD_FLUSH, 0, 0)
        check(err == 0, "a new session after 100 abandoned handshakes")

    def t_connection_cap(self):
        for attempt in range(2):
            held, greeted, refused = [], 0, 0
            for _ in range(70):
                c = self.connect(timeout=5)
                held.append(c)
                try:
                    c.greeting()
                    greeted += 1
                except Closed:
                    refused += 1
            for c in held:
                c.close()
            if greeted == 64 or attempt == 1:
                break
            time.sleep(1)  # threads of earlier checks may not have ended yet
        check(greeted == 64 and refused == 6,
              "64 connections served, the rest closed (served %d, closed %d)" % (greeted, refused))
        for _ in range(50):
            try:
                c = self.session()
                break
            except (Closed, Fail):
                time.sleep(0.1)
        err, _ = c.cmd(CMD_FLUSH, 0, 0)
        check(err == 0, "served again once the 64 went away")

    def main(self):
        tests = [
            ("garbage instead of client flags closes", self.t_garbage),
            ("unknown client flags close", self.t_unknown_client_flags),
            ("option with a wrong magic closes", self.t_wrong_option_magic),
            ("option length 0xffffffff closes at once", self.t_huge_option),
            ("unknown option: UNSUP, connection still usable", self.t_unknown_option_then_go),
            ("GO for an unknown or oversized name errs", self.t_unknown_export),
            ("EXPORT_NAME with an unknown name closes", self.t_export_name_unknown),
            ("EXPORT_NAME zero padding honours NO_ZEROES", self.t_export_name_zeroes),
            ("plain newstyle client: only EXPORT_NAME", self.t_plain_newstyle_other_option),
            ("NBD_OPT_ABORT", self.t_abort),
        ]
        for structured in (False, True):
            kind = "structured" if structured else "simple"
            tests += [
                ("requests beyond the end (%s)" % kind, lambda s=structured: self.t_beyond_end(s)),
                ("unaligned requests (%s)" % kind, lambda s=structured: self.t_unaligned(s)),
                ("bad commands and lengths (%s)" % kind, lambda s=structured: self.t_bad_commands(s)),
                ("valid writes land (%s)" % kind, lambda s=structured: self.t_valid_writes(s)),
            ]
        tests += [
            ("write with a 4 GiB length closes", self.t_huge_write),
            ("request with a bad magic closes", self.t_bad_request_magic),
            ("NBD_CMD_DISC closes", self.t_disc),
            ("100 connections dropped mid-handshake", self.t_abandoned),
            ("connection cap", self.t_connection_cap),
        ]
        for name, fn in tests:
            self.run(name, fn)
        print("# %d passed, %d failed" % (self.passed, self.failed))
        return 1 if self.failed else 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--socket", required=True)
    p.add_argument("--file", required=True)
    p.add_argument("--block-size", type=int, default=512)
    p.add_argument("--export-name", default="", help="the name LIST should report")
    sys.exit(Hostile(p.parse_args()).main())


if __name__ == "__main__":
    main()
