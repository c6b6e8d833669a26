"""Every refusal: the pod is not admitted, and the message says what to change."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenrelay.kube import admission, options

from ..support.kube import FIXTURES, INJECTOR, review

Pod = dict[str, Any]


def annotate(**values: str) -> Callable[[Pod], object]:
    def change(pod: Pod) -> None:
        pod["metadata"]["annotations"].update(
            {f"tokenrelay.dev/{k.replace('_', '-')}": v for k, v in values.items()}
        )

    return change


def add_init(container: dict[str, Any]) -> Callable[[Pod], object]:
    return lambda pod: pod["spec"].setdefault("initContainers", []).append(container)


def add_volume(name: str) -> Callable[[Pod], object]:
    return lambda pod: pod["spec"].setdefault("volumes", []).append({"name": name, "emptyDir": {}})


def app(change: Callable[[dict[str, Any]], None]) -> Callable[[Pod], object]:
    return lambda pod: change(pod["spec"]["containers"][0])


def port_8080(container: dict[str, Any]) -> None:
    container.setdefault("ports", []).append({"containerPort": 8080})


def no_identity(pod: Pod) -> None:
    del pod["metadata"]["annotations"]["tokenrelay.dev/identity"]


CASES: list[tuple[str, Callable[[Pod], object], str]] = [
    (
        "no identity",
        no_identity,
        "no identity: add the annotation tokenrelay.dev/identity: <identity uid> to the pod template "
        "(or give tokenrelay inject --identity)",
    ),
    (
        "empty identity",
        annotate(identity=" "),
        "annotation tokenrelay.dev/identity must be a non-empty string",
    ),
    (
        "typo",
        annotate(proxy_prot="8081"),
        "unknown annotation tokenrelay.dev/proxy-prot; known: tokenrelay.dev/audiences, "
        "tokenrelay.dev/cpu-limit, tokenrelay.dev/cpu-request, tokenrelay.dev/identity, "
        "tokenrelay.dev/image, tokenrelay.dev/memory-limit, "
        "tokenrelay.dev/memory-request, tokenrelay.dev/metrics-port, tokenrelay.dev/oidc-audience, "
        "tokenrelay.dev/oidc-expiration-seconds, tokenrelay.dev/proxy, tokenrelay.dev/proxy-port, "
        "tokenrelay.dev/token-files",
    ),
    (
        "proxy word",
        annotate(proxy="maybe"),
        'annotation tokenrelay.dev/proxy: \'maybe\' is neither "on" nor "off"',
    ),
    (
        "port",
        annotate(metrics_port="70000"),
        "annotation tokenrelay.dev/metrics-port: '70000' is not a port number (1-65535)",
    ),
    (
        "same ports",
        annotate(proxy="on", proxy_port="9090"),
        "annotations tokenrelay.dev/proxy-port and tokenrelay.dev/metrics-port both say 9090; "
        "choose two ports",
    ),
    (
        "token file path",
        annotate(token_files="../etc/passwd"),
        "annotation tokenrelay.dev/token-files: '../etc/passwd' is not a plain file name "
        "(letters, digits, '.', "
        "'_', '-'; not tokenrelay.sock): the files are written in /var/run/tokenrelay",
    ),
    (
        "token file audience",
        annotate(token_files="reg=registry.example.com"),
        "annotation tokenrelay.dev/token-files: audience 'registry.example.com' of reg is not kept fresh; "
        "add it to tokenrelay.dev/audiences",
    ),
    (
        "token file twice",
        annotate(token_files="t, t"),
        "annotation tokenrelay.dev/token-files: t is named twice",
    ),
    (
        "short token",
        annotate(oidc_expiration_seconds="300"),
        "annotation tokenrelay.dev/oidc-expiration-seconds: '300' is not a number of seconds from 600 "
        "(the least Kubernetes issues)",
    ),
    (
        "quantity",
        annotate(memory_limit="lots"),
        "annotation tokenrelay.dev/memory-limit: 'lots' is not a Kubernetes quantity such as 100m or 64Mi",
    ),
    (
        "request over limit",
        annotate(cpu_request="1", cpu_limit="500m"),
        "the sidecar's cpu request 1 is more than its limit 500m; lower tokenrelay.dev/cpu-request or raise "
        "tokenrelay.dev/cpu-limit",
    ),
    (
        "container clash",
        add_init({"name": "tokenrelay", "image": "x", "args": ["--once"]}),
        "the pod already has a container named tokenrelay (in initContainers); rename it, "
        "or remove a hand-written "
        "tokenrelay sidecar and let the injector add it",
    ),
    (
        # a debug container (kubectl debug) named tokenrelay would share the sidecar's name in the pod
        "ephemeral container clash",
        lambda pod: pod["spec"].update(
            ephemeralContainers=[{"name": "tokenrelay", "image": "busybox", "targetContainerName": "debug"}]
        ),
        "the pod already has a container named tokenrelay (in ephemeralContainers); rename it, "
        "or remove a hand-written tokenrelay sidecar and let the injector add it",
    ),
    (
        "volume clash",
        add_volume("tokenrelay-socket"),
        "the pod already has a volume named tokenrelay-socket; rename it",
    ),
    (
        "token volume clash",
        add_volume("tokenrelay-oidc-token"),
        "the pod already has a volume named tokenrelay-oidc-token; rename it",
    ),
    (
        "port clash",
        app(lambda c: c.setdefault("ports", []).append({"containerPort": 9090})),
        "container debug already uses port 9090; set the annotation tokenrelay.dev/metrics-port "
        "to a free port",
    ),
    (
        "proxy port clash",
        lambda pod: (annotate(proxy="on")(pod), app(port_8080)(pod)),
        "container debug already uses port 8080; set the annotation tokenrelay.dev/proxy-port to a free port",
    ),
    (
        "mount clash",
        app(
            lambda c: c.setdefault("volumeMounts", []).append(
                {"name": "run", "mountPath": "/var/run/tokenrelay/"}
            )
        ),
        "container debug already mounts run at /var/run/tokenrelay, where the injector mounts "
        "the socket; move that mount",
    ),
    (
        "env clash",
        app(lambda c: c.setdefault("env", []).append({"name": "TOKENRELAY_SOCKET", "value": "/tmp/s"})),
        "container debug already sets TOKENRELAY_SOCKET to something else; remove it (the injector sets "
        "TOKENRELAY_SOCKET=/var/run/tokenrelay/tokenrelay.sock)",
    ),
    (
        "proxy on the host network",
        lambda pod: (annotate(proxy="on")(pod), pod["spec"].update(hostNetwork=True)),
        "the pod uses hostNetwork: the proxy would listen on the node's loopback, where every "
        "process of the node "
        "could use the pod's token; remove tokenrelay.dev/proxy: on (the socket works)",
    ),
    (
        "windows",
        lambda pod: pod["spec"].update(os={"name": "windows"}),
        "the pod runs on Windows (spec.os.name: windows); tokenrelay's sidecar is a Linux container",
    ),
]


@pytest.mark.parametrize(("change", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_refusal_names_what_to_change(change: Callable[[Pod], object], message: str) -> None:
    """The webhook refuses the pod (403) with the message naming the field, annotation or name to fix."""
    pod = copy.deepcopy(FIXTURES["12-bare"]["pod"])
    change(pod)
    body, result = admission.answer(review(pod, "sandbox"), INJECTOR)
    assert result == admission.REFUSED
    assert body["response"]["allowed"] is False
    assert body["response"]["status"]["code"] == 403
    assert (
        body["response"]["status"]["message"]
        == f"tokenrelay: pod sandbox/debug cannot be injected: {message}"
    )
    assert "patch" not in body["response"]


def test_every_reason_at_once() -> None:
    """A pod with several problems hears of all of them in one refusal, not one per attempt."""
    pod = copy.deepcopy(FIXTURES["12-bare"]["pod"])
    add_volume("tokenrelay-socket")(pod)
    annotate(proxy="maybe")(pod)
    message = admission.answer(review(pod, "sandbox"), INJECTOR)[0]["response"]["status"]["message"]
    assert "volume named tokenrelay-socket" in message
    assert "'maybe' is neither" in message


def test_an_older_cluster_refuses_with_its_version() -> None:
    """On Kubernetes 1.28 (no native sidecars) an opted-in pod is refused, saying why and which version."""
    old = dataclasses.replace(INJECTOR, kube_version=(1, 28))
    body, result = admission.answer(review(FIXTURES["08-job-pod"]["pod"], "batch"), old)
    assert result == admission.REFUSED
    assert body["response"]["status"]["message"] == (
        "tokenrelay: pod batch/nightly-report-28912345-<generated> cannot be injected: tokenrelay injects a "
        "native sidecar (an init container with restartPolicy: Always), which needs Kubernetes "
        "1.29 or later; "
        "this cluster is 1.28"
    )


def test_a_body_that_is_not_an_admission_review_is_rejected() -> None:
    """A wrong apiVersion or a missing uid is a BadReview (answered 400), never an allowed pod."""
    with pytest.raises(admission.BadReview, match="apiVersion admission.k8s.io/v1"):
        admission.answer({"apiVersion": "admission.k8s.io/v1beta1", "request": {}}, INJECTOR)
    with pytest.raises(admission.BadReview, match="no request.uid"):
        admission.answer({"apiVersion": "admission.k8s.io/v1", "request": {}}, INJECTOR)


def test_a_pod_the_mutation_cannot_read_is_refused_not_crashed() -> None:
    """Should the mutation ever fail on a pod, the webhook refuses it with a reason to report (the pod
    opted in and must not start without its sidecar) instead of failing the call."""
    pod = copy.deepcopy(FIXTURES["12-bare"]["pod"])
    pod["spec"]["containers"] = ["not-a-container"]
    body, result = admission.answer(review(pod, "sandbox"), INJECTOR)
    assert result == admission.REFUSED
    assert body["response"]["status"]["message"] == (
        "tokenrelay: pod sandbox/debug cannot be injected: internal error in the injector "
        "(AttributeError: 'str' object has no attribute 'get'); please report it"
    )


def test_inject_refuses_yaml_that_is_not_a_pod_template() -> None:
    """`tokenrelay inject` names the workload and the path of a template of the wrong shape."""
    import io

    from tokenrelay.kube import inject

    text = "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: c}\n"
    text += "spec: {jobTemplate: {spec: {template: []}}}\n"
    out, err = io.StringIO(), io.StringIO()
    assert inject.inject_text(text, INJECTOR, "org/c", out, err) == 1
    assert out.getvalue() == ""
    assert err.getvalue() == (
        "tokenrelay inject: CronJob/c (document 1): has no pod template at /spec/jobTemplate/spec/template\n"
    )
    text = text.replace("template: []", "template: {spec: {containers: [app]}}")
    err = io.StringIO()
    assert inject.inject_text(text, INJECTOR, "org/c", out, err) == 1
    assert err.getvalue().startswith(
        "tokenrelay inject: CronJob/c (document 1): not a valid pod template at "
        "/spec/jobTemplate/spec/template (AttributeError: "
    )


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(
    field=st.sampled_from(
        ["kind", "object", "namespace", "name", "operation", "object.metadata", "object.metadata.name",
         "object.metadata.generateName", "object.metadata.annotations", "object.spec"]
    ),
    value=JSON,
)  # fmt: skip
def test_any_json_in_any_field_is_an_answer_or_a_bad_review(field: str, value: Any) -> None:
    """Whatever JSON stands in a field of the review, the webhook answers (allowed, patched or refused)
    or calls it a BadReview (400): never another exception, which would be a 500."""
    body = review(copy.deepcopy(FIXTURES["12-bare"]["pod"]), "sandbox")
    *parents, last = field.split(".")
    target = body["request"]
    for part in parents:
        target = target[part]
    target[last] = value
    try:
        answer, result = admission.answer(body, INJECTOR)
    except admission.BadReview:
        return
    assert result in admission.RESULTS
    assert answer["response"]["uid"] == body["request"]["uid"]
    admission.pod_name(body)


def test_a_choice_annotation_takes_only_its_choices() -> None:
    """An annotation of kind "choice" (as tokenrelay.dev/mode will be) takes its values in any case and
    refuses another, listing the values it takes."""
    mode = options.Annotation(
        options.PREFIX + "mode",
        "mode",
        "choice",
        "How tokens reach the pod",
        "sidecar",
        choices=("sidecar", "agent"),
    )
    assert options.check(mode, " Agent ") == "agent"
    with pytest.raises(ValueError, match=r"^'node' is not one of sidecar, agent$"):
        options.check(mode, "node")
