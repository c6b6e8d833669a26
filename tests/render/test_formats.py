"""Each --render format changes only tokenrelay's entries: the user's lines, entries, comments and keys
stay byte for byte across refreshes, and taking tokenrelay's entries out gives the user's file back.
What is written is read by each tool's own grammar where one is at hand (Python's netrc, json,
ElementTree)."""

from __future__ import annotations

import base64
import json
import netrc
from pathlib import Path
from xml.etree import ElementTree

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenrelay.helpers.hosts import Host, parse_spec
from tokenrelay.render import Entry, FormatError, block, parse

HOSTS = [parse_spec("127.0.0.1:4873"), parse_spec("repo.example.com=shared")]


def entries(fmt_spec: str, token: str, hosts: list[Host] = HOSTS) -> tuple[list[str], list[Entry]]:
    render = parse(fmt_spec)
    keys = [render.format.key(host) for host in hosts]
    made = [
        Entry(render.format.key(host), host, f"{token}{i}", "2026-11-27T12:00:00.000Z")
        for i, host in enumerate(hosts)
    ]
    return keys, made


def cycle(spec: str, user: str) -> tuple[str, str, str | None]:
    """The file after a first render, after a refresh, and after a clean stop."""
    fmt = parse(spec).format
    owned, first = entries(spec, "tokA")
    _, second = entries(spec, "tokB")
    one = fmt.render(user, owned, first)
    assert one is not None
    two = fmt.render(one, owned, second)
    assert two is not None
    return one, two, fmt.render(two, owned, [])


NETRC = "# my machines\nmachine example.org login me password mine\n\ndefault login anonymous password x\n"


def test_netrc_block_goes_first_and_a_stop_gives_the_users_file_back(tmp_path: Path) -> None:
    """The netrc block comes before the user's entries (curl and Go take the first match, and
    ``default`` must stay last); a refresh replaces it in place; a stop leaves the user's bytes."""
    _, two, stopped = cycle("netrc=x", NETRC)
    assert two.startswith(block.BEGIN + "\n")
    assert two.endswith(NETRC)
    assert "tokA" not in two
    assert stopped == NETRC
    path = tmp_path / "netrc"
    path.write_text(two)
    parsed = netrc.netrc(str(path))  # Python's own grammar (requests, pip)
    assert parsed.authenticators("127.0.0.1") == ("_token", "", "tokB0")
    assert parsed.authenticators("repo.example.com") == ("_token", "", "tokB1")
    assert parsed.authenticators("example.org") == ("me", "", "mine")


def test_netrc_refuses_one_name_with_two_audiences() -> None:
    """netrc names machines without a port: two ports of one host with two audiences cannot share it."""
    with pytest.raises(ValueError, match="cannot get two audiences"):
        parse("netrc=x").format.check([parse_spec("127.0.0.1:1=a"), parse_spec("127.0.0.1:2=b")])
    parse("netrc=x").format.check([parse_spec("127.0.0.1:1=a"), parse_spec("127.0.0.1:2=a")])


def test_npmrc_block_goes_last_and_reads_back() -> None:
    """The npmrc block comes after the user's settings (npm's ini takes a key's last value), one
    ``//HOST/:_authToken=`` a host, port included."""
    user = "; mine\nregistry=https://registry.npmjs.org/\n//registry.example.org/:_authToken=mine\n"
    _, two, stopped = cycle("npmrc=x", user)
    assert two.startswith(user)
    assert "//127.0.0.1:4873/:_authToken=tokB0\n" in two
    assert parse("npmrc=x").format.tokens(two) == {"127.0.0.1:4873": "tokB0", "repo.example.com": "tokB1"}
    assert stopped == user


@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=40), max_size=8))
def test_block_formats_keep_any_user_lines(lines: list[str]) -> None:
    """Whatever lines the user has (short of tokenrelay's own markers), a render and a stop return
    them byte for byte."""
    user = "".join(line.replace("\r", "").replace("\n", "") + "\n" for line in lines)
    if block.BEGIN in user or block.END in user:
        return
    for spec in ("netrc=x", "npmrc=x"):
        _, two, stopped = cycle(spec, user)
        assert stopped == user
        assert user in two


@pytest.mark.parametrize("spec", ["netrc=x", "npmrc=x"])
@pytest.mark.parametrize("token", ["a b", "a\tb", "a\nmachine evil.example login x password y", "a#b", 'a"b'])
def test_line_formats_refuse_a_token_that_would_change_the_lines_meaning(spec: str, token: str) -> None:
    """A token with whitespace, a quote or a comment sign is never written into ``.netrc`` or
    ``.npmrc``, where it would end the entry early or add one (a machine of someone else's)."""
    host = parse_spec("repo.example.com")
    fmt = parse(spec).format
    with pytest.raises(FormatError, match="the token holds a space, quote, '#' or backslash"):
        fmt.render(NETRC, [fmt.key(host)], [Entry(fmt.key(host), host, token, "2026-11-27T12:00:00.000Z")])


SETTINGS = """<?xml version="1.0" encoding="UTF-8"?>
<!-- my settings -->
<settings xmlns="http://maven.apache.org/SETTINGS/1.0.0">
    <servers>
        <!-- <server><id>127.0.0.1:4873</id><password>not this one</password></server> -->
        <server>
            <id>corp</id>
            <username>me</username>
            <password>mine</password>
        </server>
    </servers>
</settings>
"""


def test_maven_adds_servers_beside_the_users_and_a_stop_gives_the_file_back() -> None:
    """tokenrelay's ``<server>`` elements go at the end of ``<servers>``, lined up with the user's;
    a commented-out server with the same id is left alone; the result is XML Maven can read."""
    _, two, stopped = cycle("maven=x", SETTINGS)
    assert stopped == SETTINGS
    assert "<!-- <server><id>127.0.0.1:4873</id><password>not this one</password></server> -->" in two
    ns = {"m": "http://maven.apache.org/SETTINGS/1.0.0"}
    root = ElementTree.fromstring(two)  # noqa: S314 - our own output
    servers = root.findall("m:servers/m:server", ns)
    found = {s.findtext("m:id", namespaces=ns): s.findtext("m:password", namespaces=ns) for s in servers}
    assert found == {"corp": "mine", "127.0.0.1:4873": "tokB0", "repo.example.com": "tokB1"}
    assert "        <server>\n            <id>127.0.0.1:4873</id>\n" in two


def test_maven_takes_over_a_pasted_server_of_its_id_in_place() -> None:
    """A ``<server>`` the user pasted for a host tokenrelay owns is replaced where it stands."""
    user = SETTINGS.replace(
        "    </servers>",
        "        <server><id>repo.example.com</id><password>pasted</password></server>\n    </servers>",
    )
    _, two, _ = cycle("maven=x", user)
    assert "pasted" not in two
    assert two.index("<id>repo.example.com</id>") < two.rindex("<id>127.0.0.1:4873</id>")


def test_maven_sets_the_users_own_server_aside_and_gives_it_back_where_it_stood() -> None:
    """The user's ``<server>`` for a host tokenrelay renders (any username but ``_token``) is set
    aside whole, never read by Maven beside tokenrelay's (one ``<server>`` per id), and a stop with
    it gives the user's file back byte for byte; tokenrelay's own are never set aside."""
    theirs = (
        "<server>\n            <id>repo.example.com</id>\n"
        "            <password>my&amp;own</password>\n        </server>"
    )
    user = SETTINGS.replace(
        "        <server>\n            <id>corp</id>",
        f"        {theirs}\n        <server>\n            <id>corp</id>",
    )
    fmt = parse("maven=x").format
    owned, first = entries("maven=x", "tokA")
    assert fmt.set_aside(user, owned) == {"repo.example.com": theirs}
    aside = fmt.set_aside(user, owned)
    running = fmt.render(user, owned, first, aside)
    assert running is not None and "my&amp;own" not in running
    assert fmt.set_aside(running, owned) == {}
    ns = {"m": "http://maven.apache.org/SETTINGS/1.0.0"}
    root = ElementTree.fromstring(running)  # noqa: S314 - our own output
    ids = [s.findtext("m:id", "", namespaces=ns) for s in root.findall("m:servers/m:server", ns)]
    assert sorted(ids) == ["127.0.0.1:4873", "corp", "repo.example.com"]
    assert fmt.render(running, owned, [], aside) == user
    partial = fmt.render(running, owned, first[:1], aside)  # no token for it yet: the user's serves
    assert partial is not None and "my&amp;own" in partial and "tokA1" not in partial


def test_maven_escapes_the_token_as_xml_text() -> None:
    """A token holding XML's own characters is written escaped: the file stays XML, and the password
    Maven reads is the token exactly."""
    token = "a&b<c>d\"e'f"
    fmt = parse("maven=x").format
    host = parse_spec("repo.example.com")
    written = fmt.render(
        SETTINGS, [host.netloc], [Entry(host.netloc, host, token, "2026-11-27T12:00:00.000Z")]
    )
    assert written is not None
    ns = {"m": "http://maven.apache.org/SETTINGS/1.0.0"}
    servers = ElementTree.fromstring(written).findall("m:servers/m:server", ns)  # noqa: S314 - our own output
    passwords = {s.findtext("m:id", "", ns): s.findtext("m:password", "", ns) for s in servers}
    assert passwords["repo.example.com"] == token


def test_maven_ids_come_from_render_maven_ids() -> None:
    """--render-maven-ids names a host's ``<server>`` by the repository id the user's POM uses."""

    fmt = parse("maven=x", {"render_maven_ids": ("127.0.0.1:4873=internal",)}).format
    assert fmt.key(HOSTS[0]) == "internal"
    assert fmt.key(HOSTS[1]) == "repo.example.com"


def test_maven_creates_settings_and_refuses_broken_xml() -> None:
    """No file: a complete settings.xml. A file that is not XML: a FormatError, the file untouched."""
    fmt = parse("maven=x").format
    owned, made = entries("maven=x", "tok")
    created = fmt.render(None, owned, made)
    assert created is not None
    root = ElementTree.fromstring(created)  # noqa: S314 - our own output
    assert root.tag.endswith("settings")
    with pytest.raises(FormatError, match="not well-formed XML"):
        fmt.render("<settings><servers></settings>", owned, made)


DOCKER = '{\n  "auths": {\n    "example.org": {"auth": "bWU6bWluZQ=="}\n  },\n  "psFormat": "table"\n}\n'


def test_docker_config_edits_only_its_auths_members() -> None:
    """``auths`` gains a member per host, ``auth`` = base64 of ``_token:TOKEN``; every other key keeps
    its bytes and its spacing; a stop gives the file back."""
    _, two, stopped = cycle("docker-config=x", DOCKER)
    assert stopped == DOCKER
    assert '"psFormat": "table"\n}\n' in two
    assert '    "example.org": {"auth": "bWU6bWluZQ=="},\n    "127.0.0.1:4873": {"auth": ' in two
    auths = json.loads(two)["auths"]
    assert base64.b64decode(auths["127.0.0.1:4873"]["auth"]) == b"_token:tokB0"
    assert parse("docker-config=x").format.tokens(two)["repo.example.com"] == "tokB1"


def test_docker_config_sets_the_users_own_auths_entry_aside_and_gives_it_back() -> None:
    """The user's ``auths`` member for a host tokenrelay renders (an ``auth`` that is not
    ``_token:...``, or credentials of any other shape) is set aside, replaced while tokenrelay runs,
    and a stop with it gives the file back byte for byte."""
    user = DOCKER.replace(
        '"example.org"', '"repo.example.com": {"username": "me", "password": "pw"},\n    "example.org"'
    )
    fmt = parse("docker-config=x").format
    owned, first = entries("docker-config=x", "tokA")
    aside = fmt.set_aside(user, owned)
    assert aside == {"repo.example.com": '{"username": "me", "password": "pw"}'}
    running = fmt.render(user, owned, first, aside)
    assert running is not None
    assert json.loads(running)["auths"]["repo.example.com"] == json.loads(_entry_value("_token:tokA1"))
    assert fmt.set_aside(running, owned) == {}
    assert fmt.render(running, owned, [], aside) == user


def _entry_value(credentials: str) -> str:
    return json.dumps({"auth": base64.b64encode(credentials.encode()).decode()})


@pytest.mark.parametrize(
    "user", ["{}", '{"credHelpers": {"x": "y"}}', '{"auths": {}}', '{"auths":{"a":{"auth":"eA=="}}}']
)
def test_docker_config_any_shape_round_trips(user: str) -> None:
    """An object with or without ``auths``, empty or not, compact or spaced: valid JSON after each
    render, and the user's members as they were."""
    _, two, stopped = cycle("docker-config=x", user)
    assert set(json.loads(two)["auths"]) >= {"127.0.0.1:4873", "repo.example.com"}
    assert stopped is not None
    assert json.loads(stopped) == {"auths": {}, **json.loads(user)}


def test_docker_config_refuses_what_is_not_a_json_object() -> None:
    """A config.json that is not a JSON object is a FormatError, not a guess."""
    owned, made = entries("docker-config=x", "tok")
    for text in ("[1]", '{"auths": [', '{"auths": 3}'):
        with pytest.raises(FormatError, match="not a JSON object"):
            parse("docker-config=x").format.render(text, owned, made)


def test_template_substitutes_its_four_placeholders_only(tmp_path: Path) -> None:
    """``${token}``, ``${expires_at}``, ``${audience}`` and ``${host}`` take the first host's values;
    any other ``$`` text stays; a value is never expanded again; a stop removes the file."""
    source = tmp_path / "t.tmpl"
    source.write_text("A=${token} E=${expires_at} U=${audience} H=${host} $HOME ${other} $${token}\n")
    fmt = parse(f"template:{source}=out").format
    host = parse_spec("repo.example.com=shared")
    entry = Entry(fmt.key(host), host, "${host}", "2026-11-27T12:00:00.000Z")
    assert fmt.render(None, [], [entry]) == (
        "A=${host} E=2026-11-27T12:00:00.000Z U=shared H=repo.example.com $HOME ${other} $${host}\n"
    )
    assert fmt.render("anything", [], []) is None


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("netrc", "is not FORMAT=PATH"),
        ("=x", "is not FORMAT=PATH"),
        ("yaml=x", "unknown format 'yaml'; one of netrc, npmrc, maven, docker-config, template:SRC"),
        ("netrc:foo=x", "netrc takes no ':'"),
        ("template=x", "template needs its source file"),
    ],
)
def test_a_wrong_spec_says_what_to_write(spec: str, message: str) -> None:
    """A --render that is not FORMAT=PATH names the formats there are."""
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        parse(spec)
