"""The Pod Security Standards' "restricted" profile (Kubernetes 1.29+), as the checks a pod spec must pass.

Written from the policy's published definitions (kubernetes.io/docs/concepts/security/pod-security-standards)
so the tests can tell whether an injected pod would still be admitted in a namespace labelled
``pod-security.kubernetes.io/enforce: restricted``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

BASELINE_CAPABILITIES = {
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
    "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}  # fmt: skip
RESTRICTED_VOLUMES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected",
    "secret",
}  # fmt: skip
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}  # fmt: skip


def _containers(spec: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for field in ("initContainers", "containers", "ephemeralContainers"):
        yield from spec.get(field) or []


def violations(spec: Mapping[str, Any]) -> list[str]:
    """Every way ``spec`` (a pod spec) breaks the restricted profile; empty when it passes."""
    found: list[str] = []
    pod_sc: Mapping[str, Any] = spec.get("securityContext") or {}
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field):
            found.append(f"{field}")
    for volume in spec.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            found.append(f"volume {volume['name']} of type {sorted(kinds)}")
    for sysctl in pod_sc.get("sysctls") or []:
        if sysctl.get("name") not in SAFE_SYSCTLS:
            found.append(f"sysctl {sysctl.get('name')}")
    pod_seccomp = (pod_sc.get("seccompProfile") or {}).get("type")
    if pod_seccomp == "Unconfined":
        found.append("pod seccompProfile Unconfined")
    if pod_sc.get("runAsUser") == 0:
        found.append("pod runAsUser 0")
    for c in _containers(spec):
        name = c.get("name")
        sc: Mapping[str, Any] = c.get("securityContext") or {}
        if sc.get("privileged"):
            found.append(f"{name}: privileged")
        if (sc.get("windowsOptions") or {}).get("hostProcess"):
            found.append(f"{name}: hostProcess")
        for port in c.get("ports") or []:
            if port.get("hostPort"):
                found.append(f"{name}: hostPort {port['hostPort']}")
        if sc.get("procMount") not in (None, "Default"):
            found.append(f"{name}: procMount")
        if sc.get("allowPrivilegeEscalation") is not False:
            found.append(f"{name}: allowPrivilegeEscalation not false")
        run_as_non_root = sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot"))
        if run_as_non_root is not True:
            found.append(f"{name}: runAsNonRoot not true")
        if sc.get("runAsUser") == 0:
            found.append(f"{name}: runAsUser 0")
        seccomp = (sc.get("seccompProfile") or {}).get("type") or pod_seccomp
        if seccomp not in ("RuntimeDefault", "Localhost"):
            found.append(f"{name}: seccompProfile {seccomp}")
        capabilities: Mapping[str, Any] = sc.get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or []):
            found.append(f"{name}: capabilities do not drop ALL")
        added = set(capabilities.get("add") or [])
        if not added <= {"NET_BIND_SERVICE"} or not added <= BASELINE_CAPABILITIES:
            found.append(f"{name}: adds capabilities {sorted(added)}")
    return found
