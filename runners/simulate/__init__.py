"""The simulated OpenAI-compatible endpoint: the embedded default for the demo and tests.

Its profile (:mod:`~runners.simulate.profile`) says how it answers; :mod:`~runners.simulate.serve`
starts it, in this process or as a child process.
"""

from __future__ import annotations

from runners.simulate import profile, serve

__all__ = ["profile", "serve"]
