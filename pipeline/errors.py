"""The project's own errors; only cli.py turns them into exit codes and messages."""

import signal


class DigestError(Exception):
    """A failure a user can act on: a one-line message and an optional hint."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class ConfigError(DigestError):
    """Bad usage or invalid configuration (exit 2)."""

    exit_code = 2


class SourceError(DigestError):
    """A source stayed unavailable after retries: nothing is published (exit 3)."""

    exit_code = 3


class DeliveryError(DigestError):
    """The digest was made but some delivery failed and stays queued (exit 1)."""

    exit_code = 1


class LockedError(DigestError):
    """Another run holds the lock (exit 75, EX_TEMPFAIL, so cron retries quietly)."""

    exit_code = 75


class StoppedBySignal(DigestError):
    """SIGTERM or SIGINT stopped a command between steps (exit 128 + the signal's number, as
    if the signal had ended it; what was done is kept)."""

    def __init__(self, signum: int, what: str = "between steps; what was done is kept",
                 hint: str | None = "the next run goes on from there"):
        name = signal.Signals(signum).name
        super().__init__(f"stopped by {name} {what}", hint)
        self.exit_code = 128 + signum


class LLMCallFailed(Exception):
    """One LLM call failed after the client's retries: the reason in words (never the key),
    whether the run should stop calling (halt: a refused key, an unknown model), and whether
    the provider's content filter refused it (filtered: the paper's words, not a provider down)."""

    def __init__(self, why: str, halt: bool = False, filtered: bool = False):
        super().__init__(why)
        self.why = why
        self.halt = halt
        self.filtered = filtered
