"""Switchboard's Grafana dashboards, built from code into committed JSON.

``dashboards.src`` holds one module per dashboard (built with ``grafana-foundation-sdk``),
``dashboards.build`` writes or checks ``dashboards/json/``, ``dashboards.queries`` lists
every panel query with template variables substituted, ``dashboards.catalogue`` reads the
metric catalogue (``docs/metrics.md``) that every query must stay within, and
``dashboards.tscheck`` type-checks the JSON against ``@grafana/schema`` with ``tsc``.
"""

from pathlib import Path

__all__ = ["JSON_DIR", "REPO_ROOT"]

#: The repository checkout this package lives in.
REPO_ROOT = Path(__file__).resolve().parent.parent
#: Where the generated dashboards are committed (and Grafana provisioning reads them).
JSON_DIR = REPO_ROOT / "dashboards" / "json"
