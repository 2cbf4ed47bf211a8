"""Evidence from the machine: GPU state through NVML (:mod:`~runners.probes.gpu`), containers
through the Docker Engine API (:mod:`~runners.probes.containers`), and the evidence stages'
artifacts written from their readings (:mod:`~runners.probes.evidence`).
"""

from __future__ import annotations

from runners.probes import containers, evidence, gpu

__all__ = [
    "containers",
    "evidence",
    "gpu",
]
