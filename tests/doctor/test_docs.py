"""The troubleshooting guide follows the doctor: every check the doctor can print is documented."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_every_check_id_is_documented() -> None:
    """Each check id in the doctor's code (with a host or number part as HOST / N) is in
    docs/troubleshooting.md, and the README points at the doctor."""
    source = "\n".join(path.read_text() for path in (REPO / "src" / "tokenrelay" / "doctor").glob("*.py"))
    ids = set(re.findall(r"\"((?:config|oidc|service|sidecar|clients)\.[a-z_.]+)(?:\{[^}]*\})?\"", source))
    ids |= {f"{prefix}N" for prefix in re.findall(r"f\"((?:service|sidecar)\.[a-z]+\.)\{number\}\"", source)}
    ids |= {f"{prefix}HOST" for prefix in re.findall(r"f\"(clients\.[a-z]+\.)\{host\.netloc\}\"", source)}
    ids.discard("config.json")  # a file name, not a check
    assert len(ids) > 20, ids
    guide = (REPO / "docs" / "troubleshooting.md").read_text()
    missing = sorted(i for i in ids if f"`{i}" not in guide and not i.endswith("."))
    assert missing == []
    assert "tokenrelay doctor" in (REPO / "README.md").read_text()
