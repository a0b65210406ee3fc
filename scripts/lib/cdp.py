"""A minimal Chrome DevTools Protocol client: one WebSocket (RFC 6455, text frames, no
extensions) to the browser endpoint, flattened sessions for pages. Standard library only.

    browser = CDP("ws://127.0.0.1:PORT/devtools/browser/ID")
    target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    browser.call("Runtime.enable", session=session)
    browser.wait_event(lambda event: event["method"] == "Page.loadEventFired", timeout=10)

A reader thread takes every message off the socket: answers wake the call that waits for them,
events are appended to `events` (all of them, for the test to search), and `on_event` callbacks
run on the reader thread.
"""

import base64
import json
import os
import socket
import struct
import threading
import time
from urllib.parse import urlparse


class CDPError(RuntimeError):
    pass


class CDP:
    def __init__(self, url, timeout=10):
        parsed = urlparse(url)
        self.socket = socket.create_connection((parsed.hostname, parsed.port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.socket.sendall((f"GET {parsed.path} HTTP/1.1\r\nHost: {parsed.hostname}:{parsed.port}\r\n"
                             f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                             f"Sec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.socket.recv(4096)
            if not chunk:
                raise CDPError("the DevTools endpoint closed during the handshake")
            head += chunk
        head, self.buffer = head.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise CDPError(f"no WebSocket upgrade: {head[:200]!r}")
        self.socket.settimeout(None)
        self.next_id = 0
        self.lock = threading.Lock()  # one writer at a time
        self.condition = threading.Condition()
        self.answers = {}
        self.events = []
        self.on_event = []
        self.closed = False
        self.reader = threading.Thread(target=self._read_loop, daemon=True)
        self.reader.start()

    # --- calls and events -----------------------------------------------------------------

    def call(self, method, params=None, session=None, timeout=15):
        with self.condition:
            self.next_id += 1
            message_id = self.next_id
        message = {"id": message_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self._send(json.dumps(message).encode())
        deadline = time.monotonic() + timeout
        with self.condition:
            while message_id not in self.answers:
                remaining = deadline - time.monotonic()
                if self.closed or remaining <= 0:
                    raise CDPError(f"{method}: no answer within {timeout} s" if not self.closed
                                   else f"{method}: the DevTools connection closed")
                self.condition.wait(remaining)
            answer = self.answers.pop(message_id)
        if "error" in answer:
            raise CDPError(f"{method}: {answer['error'].get('message')} {answer['error'].get('data', '')}")
        return answer.get("result", {})

    def wait_event(self, predicate, timeout=10, start=0):
        """The first event from index `start` on for which predicate(event) holds, or None."""
        deadline = time.monotonic() + timeout
        with self.condition:
            index = start
            while True:
                while index < len(self.events):
                    if predicate(self.events[index]):
                        return self.events[index]
                    index += 1
                remaining = deadline - time.monotonic()
                if self.closed or remaining <= 0:
                    return None
                self.condition.wait(remaining)

    def close(self):
        self.closed = True
        try:
            self.socket.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.socket.close()

    # --- frames ---------------------------------------------------------------------------

    def _send(self, payload, opcode=0x1):
        header = bytearray([0x80 | opcode])
        length = len(payload)
        if length < 126:
            header.append(0x80 | length)
        elif length < 1 << 16:
            header += bytes([0x80 | 126]) + struct.pack("!H", length)
        else:
            header += bytes([0x80 | 127]) + struct.pack("!Q", length)
        mask = os.urandom(4)
        masked = bytes(byte ^ mask[index % 4] for index, byte in enumerate(payload))
        with self.lock:
            self.socket.sendall(bytes(header) + mask + masked)

    def _read_exactly(self, count):
        while len(self.buffer) < count:
            chunk = self.socket.recv(1 << 20)
            if not chunk:
                raise EOFError
            self.buffer += chunk
        data, self.buffer = self.buffer[:count], self.buffer[count:]
        return data

    def _read_message(self):
        parts = []
        while True:
            first, second = self._read_exactly(2)
            opcode, length = first & 0x0F, second & 0x7F
            if length == 126:
                length = struct.unpack("!H", self._read_exactly(2))[0]
            elif length == 127:
                length = struct.unpack("!Q", self._read_exactly(8))[0]
            mask = self._read_exactly(4) if second & 0x80 else None
            payload = self._read_exactly(length)
            if mask:
                payload = bytes(byte ^ mask[index % 4] for index, byte in enumerate(payload))
            if opcode == 0x8:
                raise EOFError
            if opcode == 0x9:
                self._send(payload, opcode=0xA)
                continue
            if opcode == 0xA:
                continue
            parts.append(payload)
            if first & 0x80:
                return b"".join(parts)

    def _read_loop(self):
        try:
            while True:
                message = json.loads(self._read_message())
                if "id" in message:
                    with self.condition:
                        self.answers[message["id"]] = message
                        self.condition.notify_all()
                else:
                    for callback in list(self.on_event):
                        callback(message)
                    with self.condition:
                        self.events.append(message)
                        self.condition.notify_all()
        except (EOFError, OSError, ValueError):
            pass
        finally:
            with self.condition:
                self.closed = True
                self.condition.notify_all()
