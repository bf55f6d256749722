"""Bearer token files and settings that cannot work: the process stops at start with a message naming the setting
(and the line, never the token)."""

from __future__ import annotations

import pytest

from deliberate.core.auth import Tokens, bearer_token, method_permissions
from deliberate.core.tls import channel_credentials, server_credentials
from deliberate.scheduler.__main__ import PERMISSION_OF_METHOD, SCHEDULER_SERVICE

KNOWN = frozenset(PERMISSION_OF_METHOD.values())


def test_a_token_without_permissions_has_them_all_and_comments_are_skipped(tmp_path):
    path = tmp_path / "tokens"
    path.write_text("# admin\nadmin-token\n\nsolver-token solve\nreader-token\tstate, feedback\n")
    tokens = Tokens.load(str(path), KNOWN)
    assert tokens.permissions("admin-token") == KNOWN == {"solve", "feedback", "state"}
    assert tokens.permissions("solver-token") == {"solve"}
    assert tokens.permissions("reader-token") == {"state", "feedback"}
    assert tokens.permissions("solver-toke") is None and tokens.permissions("") is None


def test_an_unknown_permission_names_the_line_not_the_token(tmp_path):
    path = tmp_path / "tokens"
    path.write_text("first-token\nsecret-token solve,admin\n")
    with pytest.raises(SystemExit) as stopped:
        Tokens.load(str(path), KNOWN)
    assert f"{path}:2: unknown permission admin" in str(stopped.value)
    assert "secret-token" not in str(stopped.value)


def test_an_empty_or_missing_token_file_stops_the_service(tmp_path):
    empty = tmp_path / "empty"
    empty.write_text("# nothing yet\n")
    with pytest.raises(SystemExit, match="no token in it"):
        Tokens.load(str(empty), KNOWN)
    with pytest.raises(SystemExit, match="--auth-tokens-file: cannot read"):
        Tokens.load(str(tmp_path / "absent"), KNOWN)


def test_the_bearer_token_is_read_from_the_authorization_metadata():
    assert bearer_token((("user-agent", "x"), ("authorization", "Bearer abc"))) == "abc"
    assert bearer_token((("authorization", "bearer abc"),)) == "abc"
    assert bearer_token((("authorization", "Basic abc"),)) is None
    assert bearer_token(None) is None


def test_each_scheduler_method_needs_its_permission_and_others_need_all():
    permission_of = method_permissions(SCHEDULER_SERVICE, PERMISSION_OF_METHOD)
    assert permission_of(f"/{SCHEDULER_SERVICE}/SolveStream") == "solve"
    assert permission_of(f"/{SCHEDULER_SERVICE}/GetState") == "state"
    assert permission_of(f"/{SCHEDULER_SERVICE}/SomethingNew") is None
    assert permission_of("/other.Service/Solve") is None


def test_tls_settings_that_cannot_work_stop_the_service(tmp_path):
    assert server_credentials("", "", "") is None and channel_credentials("", "", "") is None
    with pytest.raises(SystemExit, match="--tls-client-ca-file needs --tls-cert-file"):
        server_credentials("", "", "ca.pem")
    with pytest.raises(SystemExit, match="--tls-cert-file and --tls-key-file go together"):
        server_credentials("cert.pem", "", "")
    with pytest.raises(SystemExit, match="--downstream-tls-cert-file and --downstream-tls-key-file go together"):
        channel_credentials("", "client.pem", "")
    with pytest.raises(SystemExit, match=f"--downstream-tls-ca-file: cannot read '{tmp_path}/ca.pem'"):
        channel_credentials(str(tmp_path / "ca.pem"), "", "")
