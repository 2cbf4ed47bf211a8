"""anvil-ledger: an artifact ledger and evidence verification toolkit for LLM serving qualification."""

__version__ = "0.1.0"
