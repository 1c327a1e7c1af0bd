"""Delivery: files on disk, email through the outbox, a git-published reading list."""
