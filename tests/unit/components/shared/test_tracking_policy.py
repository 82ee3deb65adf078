"""What happens when the MLflow tracking server cannot be reached: real HTTP to a closed port on 127.0.0.1
(nothing listening) and to a local HTTP server standing in for MLflow's /health endpoint."""

from __future__ import annotations

import logging
import socket

import pytest

from tests.fakes.http_server import http_server
from torchtfx.components.shared.mlflow_client import (
    CONTINUE_IF_UNREACHABLE,
    FAIL_IF_UNREACHABLE,
    RedactCredentials,
    TrackingUnavailableError,
    check_reachable,
    identity_uri,
    redact,
    tracking_uri_or_none,
    unredact,
)


@pytest.fixture
def closed_port_uri() -> str:
    with socket.socket() as sock:  # bound, never listening: connections are refused
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_unreachable_server_fails_before_training_by_default(closed_port_uri):
    with pytest.raises(TrackingUnavailableError) as err:
        tracking_uri_or_none(closed_port_uri, FAIL_IF_UNREACHABLE, "Training")
    assert str(err.value) == (
        f"the MLflow tracking server at {closed_port_uri} is unreachable (ConnectionError: connection refused). "
        "Training did not start. Start the server or fix MLFLOW_TRACKING_URI; or rerun with --mlflow-unreachable "
        "continue to train without tracking (nothing will be registered or promoted)."
    )


def test_continue_policy_warns_loudly_and_disables_tracking(closed_port_uri, caplog):
    with caplog.at_level(logging.WARNING):
        assert tracking_uri_or_none(closed_port_uri, CONTINUE_IF_UNREACHABLE, "Training") is None
    assert "Training continues WITHOUT MLflow tracking" in caplog.text


def test_healthy_and_failing_servers_and_local_stores():
    answers = {"code": 200}
    with http_server(lambda method, url, body, headers: (answers["code"], "OK")) as url:
        check_reachable(url)
        answers["code"] = 503
        with pytest.raises(TrackingUnavailableError, match="answered HTTP 503"):
            check_reachable(url)
    check_reachable("sqlite:////nonexistent/mlflow.db")  # local stores are not probed


def test_credentials_never_appear_in_the_message():
    assert redact("https://alice:s3cret@mlflow.example.com/") == "https://***@mlflow.example.com/"
    with pytest.raises(TrackingUnavailableError) as err:
        check_reachable("http://alice:s3cret@127.0.0.1:9", timeout=1)
    assert "s3cret" not in str(err.value)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("http://user:password@mlflow:5000", "http://***@mlflow:5000"),
        ("postgresql://mlflow:pw@db.internal:5432/mlflow", "postgresql://***@db.internal:5432/mlflow"),
        ("https://tok3n@mlflow.example.com", "https://***@mlflow.example.com"),  # a token as the user
        ("https://h/mlflow?password=pw&db=x&Token=t#top", "https://h/mlflow?password=***&db=x&Token=***#top"),
        ("mysql://u:p@h/db?ssl_key=/k.pem&sig=abc", "mysql://***@h/db?ssl_key=***&sig=***"),
        ("API request to http://u:pw@h:5000/api/2.0/x failed", "API request to http://***@h:5000/api/2.0/x failed"),
        ("sqlite:////runs/mlflow/mlflow.db", "sqlite:////runs/mlflow/mlflow.db"),
        ("http://mlflow:5000/#/experiments", "http://mlflow:5000/#/experiments"),
    ],
)
def test_redact_hides_userinfo_and_secret_query_values(text, shown):
    assert redact(text) == shown and redact(shown) == shown


def test_unredact_takes_the_real_uri_from_the_environment_or_names_the_fix(monkeypatch):
    real = "http://alice:s3cret@mlflow:5000"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", real)
    assert unredact(redact(real)) == real
    assert unredact("sqlite:////x/mlflow.db") == "sqlite:////x/mlflow.db"  # nothing was hidden
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    with pytest.raises(TrackingUnavailableError, match=r"http://\*\*\*@mlflow:5000 was written without its cred"):
        unredact(redact(real))


def test_the_log_filter_redacts_messages_and_tracebacks(caplog):
    log = logging.getLogger("torchtfx.test_redact")
    caplog.handler.addFilter(RedactCredentials())
    try:
        raise ConnectionError("API request to http://alice:s3cret@mlflow:5000/api failed")
    except ConnectionError:
        log.exception("tracking at %s failed", "postgresql://bob:hunter2@db/mlflow")
    text = caplog.text
    assert "s3cret" not in text and "hunter2" not in text
    assert "postgresql://***@db/mlflow" in text and "http://***@mlflow:5000/api" in text


# A password holding every delimiter a URI's authority can be cut at; its pieces all start "Pw".
PASSWORD = "Pw1/Pw2#Pw3@Pw4?Pw5:Pw6"


@pytest.mark.parametrize(
    ("uri", "shown", "identity"),
    [
        ("http://user:pa/ss@host:5000", "http://***@host:5000", "http://host:5000"),
        ("postgresql://u:p/w#x@h/db", "postgresql://***@h/db", "postgresql://h/db"),
        ("http://u:p@ss@h:5000/x", "http://***@h:5000/x", "http://h:5000/x"),
        ("http://u:p?ss@h:5000", "http://***@h:5000", "http://h:5000"),
        ("http://u:p:ss@h:5000", "http://***@h:5000", "http://h:5000"),
        (
            f"http://user:{PASSWORD}@mlflow.internal:5000/",
            "http://***@mlflow.internal:5000/",
            "http://mlflow.internal:5000",
        ),
        (
            f"postgresql://mlflow:{PASSWORD}@db.internal:5432/mlflow?sslmode=require",
            "postgresql://***@db.internal:5432/mlflow?sslmode=require",
            "postgresql://db.internal:5432/mlflow",
        ),
        ("sqlite:////runs/a@b/mlflow.db", "sqlite:////runs/a@b/mlflow.db", "sqlite:////runs/a@b/mlflow.db"),
    ],
)
def test_a_password_holding_uri_delimiters_never_shows_in_messages_or_the_identity(uri, shown, identity):
    """RFC 3986 ends userinfo at the authority's last '@'; a password with an unencoded '/', '#', '?', '@' or ':'
    used to leak (redact stopped at '/', identity_uri cut at '#' first and wrote the rest to the binding file)."""
    assert redact(uri) == shown and redact(shown) == shown
    assert redact(f"API request to {uri}api/2.0/x failed") == f"API request to {shown}api/2.0/x failed"
    assert identity_uri(uri) == identity
    assert "Pw" not in redact(uri) + identity_uri(uri)
