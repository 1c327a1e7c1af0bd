"""A real SMTP server for tests (aiosmtpd on 127.0.0.1) with scripted faults.

    with SmtpServer(reject={"bad@example.org": "550 5.1.1 no such user"}) as server:
        ...send to ("127.0.0.1", server.port)...
        server.messages          # every accepted message: envelope + parsed email

Faults, all optional:
  auth=True                  AUTH LOGIN/PLAIN required, user TEST_USER / TEST_PASSWORD
                             (over plain TCP unless auth_require_tls=True)
  reject={rcpt: reply}       a fixed 5xx (or 4xx) reply to RCPT TO for that recipient
                             (a 421, here or in data_replies, then closes the connection)
  data_replies=[reply, ...]  replies to the next end-of-DATA, one each, then "250 OK";
                             ["451 4.3.0 Try again later"] is "451 once"
  stall_at="MAIL"|"RCPT"|"DATA", stall_seconds=s
                             sleep s before answering that command ("DATA": after the
                             message was received, before the 250, and the message is
                             then accepted: the ambiguous case)
  drop_after_each=True       close the connection right after each accepted message
  smtputf8=False             do not offer SMTPUTF8 (RFC 6531): a non-ASCII address is refused
  per_connection=n           a provider's cap on messages per session: after n accepted on one
                             connection, "421 4.7.0 Too many messages, closing" to the next
                             MAIL FROM, and the connection closes
  budget=n, over_budget=reply, over_budget_at="MAIL"|"RCPT"|"DATA"
                             a provider's rate limit or daily quota: after n more accepted in
                             all, that reply to that command (set `server.budget` again for the
                             next minute or day)
  tls=(cert, key)            offer STARTTLS with this certificate
  implicit_tls=True          with tls=...: TLS from the first byte (SMTPS)
A refused connection is `refused_port()`: a free port nobody listens on.
"""

from __future__ import annotations

import asyncio
import email
import logging
import socket
import ssl
import threading
from dataclasses import dataclass
from email import policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any, Self

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

TEST_USER = "digest-bot"
TEST_PASSWORD = "Pa55-w0rd-that-must-not-leak"
HOST = "127.0.0.1"


def free_port() -> int:
    """A port that was free a moment ago (aiosmtpd's Controller cannot use port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


refused_port = free_port


@dataclass
class Received:
    mail_from: str
    rcpt_tos: list[str]
    data: bytes
    message: EmailMessage
    login: str | None  # who had authenticated on that connection, if anyone
    mail_options: list[str]  # MAIL FROM's parameters: SMTPUTF8, BODY=8BITMIME


class _Handler:
    def __init__(self, server: SmtpServer):
        self.server = server

    async def _stall(self, command: str) -> None:
        if self.server.stall_at == command and self.server.stall_seconds > 0:
            await asyncio.sleep(self.server.stall_seconds)

    def _over(self, session: Any, command: str) -> str | None:
        """The provider's limit reply to this command, if one applies now."""
        with self.server.lock:
            if command == "MAIL" and not hasattr(session, "accepted"):
                session.accepted = 0
                self.server.connections += 1
            cap = self.server.per_connection
            if command == "MAIL" and cap is not None and session.accepted >= cap:
                return "421 4.7.0 Too many messages, closing"
            if self.server.over_budget_at == command and self.server.budget is not None \
                    and self.server.budget <= 0:
                return self.server.over_budget
        return None

    async def handle_MAIL(self, server: Any, session: Any, envelope: Any, address: str,
                          mail_options: list[str]) -> str:
        await self._stall("MAIL")
        with self.server.lock:
            self.server.mail_attempts += 1
        limited = self._over(session, "MAIL")
        if limited:
            return _closing(server, limited)
        envelope.mail_from = address
        envelope.mail_options.extend(mail_options)
        return "250 OK"

    async def handle_RCPT(self, server: Any, session: Any, envelope: Any, address: str,
                          rcpt_options: list[str]) -> str:
        await self._stall("RCPT")
        with self.server.lock:
            self.server.rcpt_attempts.append(address)
        reply = self.server.reject.get(address.lower()) or self._over(session, "RCPT")
        if reply:
            return _closing(server, reply)
        envelope.rcpt_tos.append(address)
        envelope.rcpt_options.extend(rcpt_options)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        with self.server.lock:
            reply = self.server.data_replies.pop(0) if self.server.data_replies else None
        reply = reply or self._over(session, "DATA")
        if reply:
            return _closing(server, reply)
        data = envelope.original_content or envelope.content
        parsed = email.message_from_bytes(data, policy=policy.default)
        login = None
        if session.authenticated and session.auth_data is not None:
            login = session.auth_data.login.decode()
        with self.server.lock:
            session.accepted = getattr(session, "accepted", 0) + 1
            if self.server.budget is not None:
                self.server.budget -= 1
            self.server.messages.append(Received(
                mail_from=envelope.mail_from, rcpt_tos=list(envelope.rcpt_tos), data=data,
                message=parsed, login=login, mail_options=list(envelope.mail_options)))
        await self._stall("DATA")
        if self.server.drop_after_each:
            asyncio.get_running_loop().call_later(0.05, server.transport.close)
        return "250 2.0.0 OK queued"


def _closing(server: Any, reply: str) -> str:
    """A reply as sent; after a 421 the connection is closed, as RFC 5321 (3.8) has a server
    do (aiosmtpd itself would stay open)."""
    if reply.startswith("421"):  # once the reply is written
        asyncio.get_running_loop().call_soon(server.transport.close)
    return reply


def _authenticator(server: Any, session: Any, envelope: Any, mechanism: str,
                   auth_data: Any) -> AuthResult:
    ok = (isinstance(auth_data, LoginPassword)
          and auth_data.login == TEST_USER.encode() and auth_data.password == TEST_PASSWORD.encode())
    # handled=False: let aiosmtpd answer "535 5.7.8 Authentication credentials invalid"
    return AuthResult(success=ok, handled=False, auth_data=auth_data if ok else None)


class SmtpServer:
    """A threaded aiosmtpd server; start()/stop() or use it as a context manager."""

    def __init__(self, *, port: int | None = None, auth: bool = False,
                 auth_require_tls: bool = False, reject: dict[str, str] | None = None,
                 data_replies: list[str] | None = None, stall_at: str | None = None,
                 stall_seconds: float = 0.0, drop_after_each: bool = False,
                 tls: tuple[Path, Path] | None = None, implicit_tls: bool = False,
                 smtputf8: bool = True, per_connection: int | None = None,
                 budget: int | None = None,
                 over_budget: str = "451 4.7.1 rate limited, try later",
                 over_budget_at: str = "MAIL"):
        self.host = HOST
        self.port = port or free_port()
        self.auth = auth
        self.auth_require_tls = auth_require_tls
        self.reject = {k.lower(): v for k, v in (reject or {}).items()}
        self.data_replies = list(data_replies or [])
        self.stall_at = stall_at
        self.stall_seconds = stall_seconds
        self.drop_after_each = drop_after_each
        self.tls = tls
        self.implicit_tls = implicit_tls
        self.smtputf8 = smtputf8
        self.per_connection = per_connection
        self.budget = budget
        self.over_budget = over_budget
        self.over_budget_at = over_budget_at
        self.connections = 0  # those that reached MAIL FROM
        self.mail_attempts = 0
        self.messages: list[Received] = []
        self.rcpt_attempts: list[str] = []
        self.lock = threading.Lock()
        self._controller: Controller | None = None

    def _context(self) -> ssl.SSLContext:
        assert self.tls is not None
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(str(self.tls[0]), str(self.tls[1]))
        return context

    def start(self) -> Self:
        # aiosmtpd's own logger would print every line it reads, AUTH blobs included.
        logging.getLogger("mail.log").setLevel(logging.ERROR)
        kwargs: dict[str, Any] = {"hostname": self.host, "port": self.port,
                                  "server_hostname": "localhost", "ready_timeout": 5,
                                  "enable_SMTPUTF8": self.smtputf8}
        if self.auth:
            # aiosmtpd only counts STARTTLS as TLS; SMTPS is TLS from the first byte anyway.
            kwargs.update(authenticator=_authenticator, auth_required=True,
                          auth_require_tls=self.auth_require_tls and not self.implicit_tls)
        if self.tls and self.implicit_tls:
            kwargs["ssl_context"] = self._context()
        elif self.tls:
            kwargs["tls_context"] = self._context()
        self._controller = Controller(_Handler(self), **kwargs)
        self._controller.start()
        return self

    def stop(self) -> None:
        if self._controller is not None:
            self._controller.stop()
            self._controller = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- what arrived ---
    def to(self, recipient: str) -> list[Received]:
        with self.lock:
            return [m for m in self.messages if recipient in m.rcpt_tos]

    @property
    def recipients(self) -> list[str]:
        with self.lock:
            return [r for m in self.messages for r in m.rcpt_tos]
