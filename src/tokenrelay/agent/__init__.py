"""``tokenrelay agent``: one relay per node, serving every opted-in pod on it (docs/agent.md)."""
