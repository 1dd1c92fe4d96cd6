"""The MCP server's stdio transport: every request gets an answer, even one it cannot read.

The SDK's stdio transport drops a line it cannot read (text that is not JSON, a string
holding a lone surrogate, JSON that is not a JSON-RPC message) with a debug log: the
client, waiting on that request's id, waits forever. Here such a line is answered with a
JSON-RPC error, then the server reads on:

- ``-32700`` (parse error), id ``null``: the line is not JSON;
- ``-32602`` (invalid params), the request's id: a string in its ``params`` holds a lone
  surrogate (``"a\\udce9"`` is valid JSON, but no UTF-8 text), or bytes that are not
  UTF-8 (Latin-1's ``caf\\xe9``), which are read as lone surrogates; the message names it;
- ``-32600`` (invalid request), id ``null``: a request whose id is neither an integer
  nor a string (``1.5``, ``true``, ``null``, ``{}``; MCP allows only those two), which the
  SDK reads as a notification and drops; it is not executed;
- ``-32600`` (invalid request): anything else the SDK could not read, or a lone surrogate
  outside ``params``.

A notification (a message without an id) is never answered, as JSON-RPC says.

Examples
--------
>>> error = unreadable_reply('{"jsonrpc": "2.0", "id": 3, "method": "ping"')
>>> error.id, error.error.code, error.error.message
(None, -32700, "Parse error: not JSON (Expecting ',' delimiter at line 1 column 45)")
>>> call = '{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"ids": ["a\\\\udce9"]}}'
>>> error = unreadable_reply(call)
>>> error.id, error.error.code
(7, -32602)
>>> error.error.message  # doctest: +ELLIPSIS
"Invalid params: params.ids[0] must be valid Unicode, got 'a\\\\udce9'; a lone surrogate ..."
"""

from __future__ import annotations

import json
import sys
from collections import deque
from contextlib import suppress
from io import TextIOWrapper
from types import TracebackType
from typing import TYPE_CHECKING, Any

import anyio
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
)
from pydantic import ValidationError

from synapse_retriever.capture.coactivation import check_unicode
from synapse_retriever.errors import InvalidValueError

if TYPE_CHECKING:
    from mcp.server import MCPServer
    from mcp.shared._stream_protocols import ReadStream, WriteStream

__all__ = ["serve_stdio", "unreadable_reply"]


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _check_strings(value: object, where: str) -> None:
    """Raise ``InvalidValueError`` naming the first string (key or value) in ``value``
    that holds a lone surrogate, and where it is."""
    if isinstance(value, str):
        check_unicode(where, value)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_strings(item, f"{where}[{index}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            check_unicode(f"a key in {where}", key)
            _check_strings(item, f"{where}.{key}")


def _request_id(message: object) -> tuple[bool, int | str | None]:
    """Whether ``message`` asks for an answer (it has an id), and the id to answer with
    (``None`` if it is not a usable one)."""
    if not isinstance(message, dict) or "id" not in message:
        return not isinstance(message, dict), None  # a notification is never answered
    found = message["id"]
    if isinstance(found, int) and not isinstance(found, bool):
        return True, found
    if isinstance(found, str):
        try:
            return True, check_unicode("id", found)
        except InvalidValueError:
            pass  # an id of no UTF-8 text cannot be echoed: null
    return True, None


def _wrong_id(message: object) -> str | None:
    """The id of ``message`` as JSON if it is neither an integer nor a string (the SDK
    reads such a request as a notification), else ``None``."""
    if not isinstance(message, dict) or "id" not in message:
        return None
    found = message["id"]
    if isinstance(found, str) or (isinstance(found, int) and not isinstance(found, bool)):
        return None
    text = json.dumps(found)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _error(request: int | str | None, code: int, message: str) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=request, error=ErrorData(code=code, message=message))


def unreadable_reply(line: str) -> JSONRPCError | None:
    """The JSON-RPC error answering ``line``, a message the SDK could not read; ``None``
    for a notification (no id), which is never answered.

    Examples
    --------
    >>> unreadable_reply("nonsense").error.code
    -32700
    >>> unreadable_reply('{"jsonrpc": "2.0", "method": "x", "params": {"a": "\\\\ud800"}}') is None
    True
    >>> error = unreadable_reply('{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}')
    >>> error.id, error.error.code, error.error.message
    (None, -32600, 'Invalid request: id must be an integer or a string, got 1.5')
    """
    try:
        message = json.loads(line.rstrip("\r\n"), parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        reason = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
        return _error(None, PARSE_ERROR, f"Parse error: not JSON ({reason})")
    except (ValueError, RecursionError) as exc:  # NaN or Infinity; nested too deep
        return _error(None, PARSE_ERROR, f"Parse error: not JSON ({exc or 'nested too deep'})")
    answered, request = _request_id(message)
    if not answered:
        return None
    wrong = _wrong_id(message)
    if wrong is not None:
        return _error(
            None,
            INVALID_REQUEST,
            f"Invalid request: id must be an integer or a string, got {wrong}",
        )
    params = message.get("params") if isinstance(message, dict) else None
    try:
        try:
            _check_strings(params, "params")
        except InvalidValueError as exc:
            return _error(request, INVALID_PARAMS, f"Invalid params: {exc}")
        _check_strings(message, "message")  # its method, say
    except InvalidValueError as exc:
        return _error(request, INVALID_REQUEST, f"Invalid request: {exc}")
    except RecursionError:
        return _error(request, INVALID_REQUEST, "Invalid request: nested too deep")
    return _error(request, INVALID_REQUEST, "Invalid request: not a JSON-RPC 2.0 message")


_UNPARSED = ("json_invalid", "string_unicode")
"""Pydantic's errors for a line it could not parse: not JSON (or a lone surrogate escaped
in it, ``"\\udce9"``), or a line holding a lone surrogate itself (a byte not UTF-8)."""


def _reply_to(failure: Exception) -> JSONRPCError | None:
    """The answer to what the SDK's transport yielded instead of a message."""
    if isinstance(failure, ValidationError):
        for error in failure.errors():
            if error["type"] in _UNPARSED and isinstance(error["input"], str):
                return unreadable_reply(error["input"])  # the line, as received
        for error in failure.errors():  # JSON, but not a message: a field missing at its top
            if error["type"] == "missing" and len(error["loc"]) == 2:
                return unreadable_reply(json.dumps(error["input"]))
    return _error(None, INVALID_REQUEST, "Invalid request: not a JSON-RPC 2.0 message")


class _AnsweringUnreadable:
    """The transport's read stream, with each item it could not read answered on
    ``replies`` instead of handed on (where it is dropped with a debug log), and so is a
    request whose id is neither an integer nor a string, which it read as a notification.

    ``lines`` holds the lines the transport has read and this stream not yet handed on,
    oldest first: the transport yields one item per line, in order."""

    def __init__(
        self,
        items: ReadStream[SessionMessage | Exception],
        replies: WriteStream[SessionMessage],
        lines: deque[str],
    ) -> None:
        self._items = items
        self._replies = replies
        self._lines = lines

    @property
    def last_context(self) -> Any:
        """The sender's context of the last item (what the SDK's dispatcher reads)."""
        return getattr(self._items, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        """The next message the transport could read, having answered those it could not."""
        while True:
            item = await self._items.receive()
            line = self._lines.popleft() if self._lines else None  # the line it was read from
            if isinstance(item, Exception):
                reply = _reply_to(item)
            elif isinstance(item.message, JSONRPCNotification) and line is not None:
                reply = unreadable_reply(line)  # a request whose id the SDK refused, or None
                if reply is None:
                    return item  # a notification indeed: it has no id
            else:
                return item
            if reply is not None:
                await self._replies.send(SessionMessage(reply))

    async def aclose(self) -> None:
        """Close the transport's read stream."""
        await self._items.aclose()

    def __aiter__(self) -> _AnsweringUnreadable:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _AnsweringUnreadable:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class _UnownedText(TextIOWrapper):
    """A text layer over stdin that leaves stdin open when it closes (or is collected)."""

    def close(self) -> None:
        with suppress(ValueError):  # detached already
            self.detach()


class _StdinLines(anyio.AsyncFile[str]):
    """stdin as UTF-8 text, each byte that is not UTF-8 read as a lone surrogate
    (``errors="surrogateescape"``), which the checks refuse by name; each line the
    transport reads is also appended to ``lines``.

    The SDK's own reader puts U+FFFD in place of such a byte: ``caf\\xe9.py`` and
    ``caf\\xe8.py`` became one id, and a tool wrote it. Given a stdin, the SDK leaves fd 0
    as it is (its own reader points fd 0 at the null device); nothing else in the server
    reads it."""

    def __init__(self, lines: deque[str]) -> None:
        super().__init__(_UnownedText(sys.stdin.buffer, encoding="utf-8", errors="surrogateescape"))
        self._lines = lines

    async def readline(self) -> str:
        """The next line (the transport reads line by line), kept in ``lines``."""
        line = await super().readline()
        if line:
            self._lines.append(line)
        return line


async def serve_stdio(server: MCPServer) -> None:
    """Serve ``server`` over stdin and stdout until the client hangs up, answering every
    request (``MCPServer.run_stdio_async`` with unreadable lines answered, and bytes that
    are not UTF-8 refused instead of replaced).

    Examples
    --------
    >>> serve_stdio.__name__  # run as anyio.run(serve_stdio, server), by synapse-retriever mcp
    'serve_stdio'
    """
    lowlevel = server._lowlevel_server  # what MCPServer.run_stdio_async runs, too
    lines: deque[str] = deque()
    async with stdio_server(_StdinLines(lines)) as (read_stream, write_stream):
        await lowlevel.run(
            _AnsweringUnreadable(read_stream, write_stream, lines),
            write_stream,
            lowlevel.create_initialization_options(),
        )
