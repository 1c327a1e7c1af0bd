"""Whose an SMTP server's refusal of one reader is: the reader's, the sender's (a limit on it,
its IP, domain or account refused), which every reader after would get too, or not told (the
outbox then asks whether every reader got the same). Apart from email.py, which speaks SMTP, as
a table of each provider's documented replies that grows with them."""

from __future__ import annotations

import re

from pipeline.deliver.channels import HELD, Deferred, Refused, Unreachable

# What the operator checks, by what the reply holds back; a limit lifts by itself. Each says
# HELD, by which `status` says it once.
LIMIT = f"the server holds the sender back (a sending limit or quota), {HELD}, no try counted, until it lifts"
_REFUSED = f"the server refuses the sender, {HELD}, no try counted, and go once it accepts; check {{}}"
IP = _REFUSED.format("the sending IP: the blocklist or provider the reply names (delist it there) and "
                     "its reverse DNS (PTR)")
AUTH = _REFUSED.format("the SPF, DKIM and DMARC records of the email.from domain")
ACCOUNT = _REFUSED.format("the account with the provider (the login of email.username_env) and the "
                          "address in email.from")

# Replies to one reader's RCPT TO or message that are the sender's, as each provider documents
# them: every reader after would get the same, so none is failed or counted and all wait (once
# two readers in a row get one: email.py's `_Session._held`). Anything else is the reader's: a
# 5xx fails their row (but see `_READERS`), a 4xx defers it. Left to that as their owner is not
# told: a bare 5.7.1 (RFC 3463's "per-host or per-recipient filtering"; Microsoft's "Delivery not
# authorized" is a group that takes its members' mail only), "Relay access denied" (the server
# takes no mail for the recipient's domain, Microsoft's 5.4.1, or this client may not relay) and
# Amazon SES's "Email address is not verified" (it names the From address, or in its sandbox a
# recipient).
_SENDER = tuple((re.compile(pattern, re.IGNORECASE), why) for pattern, why in (
    # RFC 3463 X.4.5 congestion, "useful only as a persistent transient error": Gmail's
    # "550 5.4.5 Daily user sending quota exceeded"
    (r"^[45]\d\d [45]\.4\.5\b", LIMIT),
    # RFC 3463 X.1.7 / X.1.8, the sender's address: Microsoft 365's "550 5.1.8 Access denied,
    # bad outbound sender" (an account blocked for sending)
    (r"^[45]\d\d [45]\.1\.[78]\b", ACCOUNT),
    # RFC 7372 X.7.20 to X.7.27, the sender's DKIM, SPF, DMARC or reverse DNS (X.7.25) checks
    # failed, and IANA's X.7.28, "mail flood detected" (Gmail's "unusual rate of unsolicited
    # mail" from the sender's IP or domain): Gmail's "550 5.7.26 Unauthenticated email from
    # example.org is not accepted due to domain's DMARC policy"
    (r"^[45]\d\d [45]\.7\.2[0-46-7]\b", AUTH),
    (r"^[45]\d\d [45]\.7\.2[58]\b", IP),
    # Microsoft 365's NDR table: 5.7.705 "tenant has exceeded threshold", 5.7.708 "traffic not
    # accepted from this IP", 5.7.750 "Client blocked from sending from unregistered domains";
    # 5.7.501 to 503 (the sending account banned for spam), 512 (no valid From address), 5.7.64
    # "TenantAttribution" (the tenant's connector), 5.7.800 (the sender's domain banned); 506 "Bad
    # HELO" (this client's own name), 508 (its IPv6 range over its limits), 511 "banned sender"
    # and 606 to 649 "banned sending IP" (the sending IP, on its blocked senders list); 509 (the
    # From domain fails DMARC, policy reject); 4.7.500 to 699 and 850 to 899 "Access denied,
    # please try again later" (sending restricted while it looks into it). Not 504, 505, 507,
    # 510, 513 or 703: the recipient's address, or a block the recipient's organisation set.
    (r"^[45]\d\d [45]\.7\.(705|750|50[1-3]|512|64|800)\b", ACCOUNT),
    (r"^[45]\d\d [45]\.7\.(708|50[68]|511|6(0[6-9]|[1-4]\d))\b", IP),
    (r"^[45]\d\d 5\.7\.509\b", AUTH),
    (r"^4\d\d 4\.7\.([56]\d\d|8[5-9]\d)\b", LIMIT),
    # a sending limit: Gmail's "Daily SMTP relay limit exceeded", Amazon SES's "454 Throttling
    # failure: Daily message quota exceeded", Microsoft 365's "5.1.90 ... your daily limit
    # for message recipients", "5.2.2 Submission quota exceeded" (Gmail's 5.2.2 is a reader's full
    # mailbox: the words tell), Outlook.com's "4.7.650 ... temporarily rate limited"
    (r"\b(sending|relay|daily|hourly|rate)\b.{0,40}\b(quota|limit)|\bthrottl|\bsubmission quota\b", LIMIT),
    # the account held back: Amazon SES's "554 Message rejected: Sending paused for this
    # account", Microsoft's "Client was not authenticated" (a login missing)
    (r"\bsending (is )?(paused|suspended|disabled)\b|\bclient was not authenticated\b", ACCOUNT),
    # its IP: Gmail's "mail sent from your IP address has been blocked", "The IP you're using to
    # send mail is not authorized", Outlook.com's "messages from [192.0.2.1] weren't sent ... part
    # of their network is on our block list (S3140)"; its reverse DNS: Gmail's "550 5.7.1
    # [192.0.2.1] The IP address sending this message does not have a PTR record setup",
    # Microsoft's "the sending IPv6 address ... must have a reverse DNS record"
    (r"\b(from|your|the) (this |your )?IP\b|\bnetwork is on our block ?list\b|\bPTR records?\b"
     r"|\breverse DNS record\b", IP),
    # Postfix's client, HELO and sender restrictions, the same for every recipient (and said at
    # RCPT TO, smtpd_delay_reject): "Client host rejected", "Client host [...] blocked using
    # zen.spamhaus.org", "Helo command rejected", "Sender address rejected: not owned by user"
    (r"\b(client host|helo command) rejected\b|\bblocked using\b", IP),
    (r"\bsender address rejected\b", ACCOUNT),
))


# RFC 3463's subjects that are the reader's: X.1.1 to X.1.6 their address (and Microsoft's
# X.1.10, recipient not found), X.2 their mailbox; and RFC 5321's 551 to 553 (not local, storage,
# mailbox name). Any other 5xx names no owner (`Refused.unowned`): the same to every reader is
# the sender's.
_READERS = re.compile(r"^5(5[1-3] |\d\d 5\.(1\.([1-6]|10)|2\.\d{1,3})\b)")


# A 5xx that is the reader's but says "later": their mailbox takes no more mail from this sender
# this hour. Microsoft 365's "550 5.2.121 Recipient's per hour message receive limit from specific
# sender exceeded" and 5.2.122 (its NDR table: "Try sending the email later"), Gmail's "550 5.2.1
# The user you are trying to contact is receiving mail at a rate that prevents additional
# messages" (its 4.2.1 says so as a 4xx). Failed, the reader lost the week for a busy hour.
_LATER = re.compile(r"^5\d\d 5\.2\.12[12]\b|\breceiving mail at a rate\b", re.IGNORECASE)


def refusal(words: str) -> Refused | Deferred | Unreachable:
    """A reply to one reader: a 5xx fails their row, a 4xx defers it, and so does a 5xx that
    says later (`_LATER`, before the sender's limits: it is the reader's mailbox's); one that is
    the sender's (`_SENDER`) is no reader's failure: it waits, uncounted, for the limit to lift
    or the block to be mended, as for a server not reached (and the readers after it, `_held`),
    saying what to check; a 5xx that names no owner is marked so (`_READERS`)."""
    if _LATER.search(words):
        return Deferred(words)
    why = next((why for pattern, why in _SENDER if pattern.search(words)), None)
    if why is not None:
        return Unreachable(f"{words}: {why}")
    if words.startswith("5"):
        return Refused(words, unowned=not _READERS.match(words))
    return Deferred(words)
