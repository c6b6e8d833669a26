"""How a user spells each setting of ``tokenrelay run``, and its defaults: the names written once.

Every option is a flag ``--name-with-dashes`` and an environment variable ``TOKENRELAY_NAME``; error
messages name both through ``where`` rather than by hand, and the credential helpers read the same
variables by these names. ``sidecar.settings.OPTIONS`` is the table these names come from (a test pins that
they agree). Standard library only, no imports at all: the credential helpers import this module.
"""

ENV_PREFIX = "TOKENRELAY_"

# Every option of `tokenrelay run`, in the order of sidecar.settings.OPTIONS.
OPTION_NAMES = (
    "auth_url",
    "api_url",
    "identity",
    "audience",
    "exchange_timeout",
    "wait_timeout",
    "id_token_source",
    "id_token_file",
    "id_token_env",
    "id_token_audience",
    "azure_service_connection_id",
    "socket",
    "socket_mode",
    "socket_allow_uid",
    "socket_allow_gid",
    "shutdown_grace",
    "proxy_listen",
    "proxy_allow_remote",
    "upstream_ca",
    "proxy_timeout",
    "proxy_max_connections",
    "metrics_listen",
    "token_file",
    "token_file_mode",
    "hosts",
    "render",
    "render_mode",
    "render_maven_ids",
    "once",
    "log_format",
    "log_level",
)
# The options ``tokenrelay exec`` has beyond run's, in the order of exec.options.EXEC_OPTIONS.
EXEC_OPTION_NAMES = ("configure", "export_token")
# The options ``tokenrelay agent`` has beyond those it shares with run, in the order of
# agent.options.AGENT_OPTIONS.
AGENT_OPTION_NAMES = (
    "listen",
    "node_name",
    "cluster_jwks_file",
    "cluster_jwks_refresh",
    "cluster_issuer",
    "pod_token_audience",
    "max_exchanges_per_second",
    "max_requests_per_connection",
    "max_requests_per_pod",
    "pod_request_burst",
    "max_exchanges_per_account",
    "refusal_ttl",
    "head_timeout",
    "idle_timeout",
    "max_connections",
    "max_connections_per_peer",
    "max_cache_entries",
    "startup_taint",
)

# The defaults every layer imports (config's table and Settings, and the parts' own constructors).
DEFAULT_SOCKET = "/var/run/tokenrelay/tokenrelay.sock"
DEFAULT_AGENT_SOCKET = "/var/run/tokenrelay-agent/agent.sock"
DEFAULT_ID_TOKEN_FILE = "/var/run/secrets/tokens/oidc-token"
DEFAULT_EXCHANGE_TIMEOUT = 10.0
DEFAULT_WAIT_TIMEOUT = 10.0
DEFAULT_SHUTDOWN_GRACE = 10.0
DEFAULT_PROXY_TIMEOUT = 60.0
DEFAULT_PROXY_MAX_CONNECTIONS = 1024
DEFAULT_PROXY_LISTEN = ("127.0.0.1", 8080)
DEFAULT_MODE = 0o600  # of the socket and of --token-file files

# The local API's text/plain token answer states the token's expiry (Unix seconds) in this header, so
# that a credential helper learns it without decoding JSON or the token (the JSON answer has expireTime).
EXPIRES_HEADER = "Token-Expires-At"

# Variables read beside the options: the config file, and the helpers' host list.
CONFIG_ENV = ENV_PREFIX + "CONFIG"
HOSTS_ENV = ENV_PREFIX + "HOSTS"
# Where the proxy listens (http://127.0.0.1:PORT): set by the injector in app containers when the pod's
# proxy is on, and by ``tokenrelay exec`` for its command beside SOCKET_ENV.
PROXY_URL_ENV = ENV_PREFIX + "PROXY_URL"
# A pod served by the node agent (docs/agent.md): the file holding its projected service-account
# token, sent on every call, and the identity it asks for (run's --identity variable).
AGENT_TOKEN_FILE_ENV = ENV_PREFIX + "AGENT_TOKEN_FILE"
IDENTITY_ENV = ENV_PREFIX + "IDENTITY"


def flag(name: str) -> str:
    """``--name-with-dashes`` for the option ``name``."""
    return "--" + name.replace("_", "-")


def env(name: str) -> str:
    """``TOKENRELAY_NAME`` for the option ``name``."""
    return ENV_PREFIX + name.upper()


def where(name: str) -> str:
    """How a user sets option ``name``, for messages: ``--name (env TOKENRELAY_NAME)``."""
    if name not in OPTION_NAMES and name not in EXEC_OPTION_NAMES and name not in AGENT_OPTION_NAMES:
        raise KeyError(f"no option {name!r}")  # a typo here would print a setting that does not exist
    return f"{flag(name)} (env {env(name)})"


SOCKET_ENV = env("socket")
