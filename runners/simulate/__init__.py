"""The simulated OpenAI-compatible endpoint: the embedded default for the demo and tests."""
