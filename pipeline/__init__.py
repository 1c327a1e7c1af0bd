"""rl-digest: a weekly bilingual digest of reinforcement learning for LLMs papers."""

__version__ = "0.1.0"
