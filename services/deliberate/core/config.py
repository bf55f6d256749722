"""12-factor configuration: every setting is a pydantic field with a flag and an environment variable.

`--max-drafts 8` and `DELIBERATE_MAX_DRAFTS=8` set the same field; a flag beats the environment,
the environment beats the default. docs/configuration.md's table is generated from these models
(`make config-table`: `python -m deliberate.settings_table --write`).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, Field

ENV_PREFIX = "DELIBERATE_"

S = TypeVar("S", bound=BaseModel)


class CommonSettings(BaseModel):
    host: str = Field("127.0.0.1", description="Address the gRPC server binds to.")
    log_level: str = Field("INFO", description="Python log level of the structured JSON logs.")
    trace_exporter: str = Field(
        "auto",
        description="Span exporter: otlp, file, console, none; auto = otlp when OTEL_EXPORTER_OTLP_ENDPOINT is "
        "set, else file when a trace file is set.",
    )
    trace_file: str = Field(
        "",
        description="File the `file` exporter appends spans to, one OTLP/JSON line per batch "
        "(the OpenTelemetry Collector's file exporter format; several services may share one file).",
    )
    shutdown_grace_s: float = Field(5.0, description="Seconds in-flight RPCs get to finish on SIGTERM.")
    max_connection_age_s: float = Field(
        0.0,
        ge=0,
        description="Clients are asked (HTTP/2 GOAWAY) to reconnect after this long, calls in flight finishing "
        "first, so a balancing client resolves its target again and finds replicas added since "
        "(docs/deploy.md#load-balancing). 0: never.",
    )
    tls_cert_file: str = Field(
        "",
        description="PEM certificate (chain) the server presents; with --tls-key-file it serves TLS only. "
        "Empty: plain text (docs/security.md).",
    )
    tls_key_file: str = Field("", description="PEM private key of --tls-cert-file.")
    tls_client_ca_file: str = Field(
        "", description="PEM CA bundle; when set, clients must present a certificate it signed (mTLS)."
    )


class DownstreamTlsSettings(BaseModel):
    """How a service calls the services behind it (the Scheduler its three, the gateway the Scheduler)."""

    downstream_tls_ca_file: str = Field(
        "",
        description="PEM CA bundle that verifies the called services' certificates; any downstream_tls_* "
        "setting turns TLS on for the calls (no CA file: the system's CAs). Empty: plain text.",
    )
    downstream_tls_cert_file: str = Field(
        "", description="PEM client certificate presented to the called services (their --tls-client-ca-file)."
    )
    downstream_tls_key_file: str = Field("", description="PEM private key of --downstream-tls-cert-file.")


class PromptLimits(BaseModel):
    """The prompt limit of every service that reads the user's prompt (docs/limits.md)."""

    max_prompt_chars: int = Field(8000, description="Longest prompt accepted, in characters.")


class GenerationLimits(BaseModel):
    """The token limit of every service that generates or asks for generated text."""

    max_new_tokens_limit: int = Field(1024, description="Largest max_new_tokens a request may ask for.")


class DraftLimits(BaseModel):
    """The limits on a round of drafts, the Scheduler's (per request) and the Drafter's (per call) alike."""

    max_drafts: int = Field(8, description="Largest num_drafts a request (or a Drafter call) may ask for.")
    max_hint_chars: int = Field(500, description="Longest strategy hint accepted, in characters.")


def env_name(field: str) -> str:
    return ENV_PREFIX + field.upper()


def flag_name(field: str) -> str:
    return "--" + field.replace("_", "-")


def parse_settings(model: type[S], argv: Sequence[str] | None = None, prog: str | None = None) -> S:
    """Builds `model` from flags, then environment variables, then the field defaults."""
    parser = argparse.ArgumentParser(prog=prog, description=model.__doc__)
    for name, field in model.model_fields.items():
        parser.add_argument(
            flag_name(name), dest=name, default=None, help=f"{field.description} (env {env_name(name)})"
        )
    given = vars(parser.parse_args(argv))
    values = {}
    for name in model.model_fields:
        raw = given[name] if given[name] is not None else os.environ.get(env_name(name))
        if raw is not None:
            values[name] = raw
    return model.model_validate(values)


def markdown_table(models: dict[str, type[BaseModel]]) -> str:
    """One row per setting of each service, for docs/configuration.md; the common settings appear once."""
    rows = ["| service | flag | environment variable | default | meaning |", "|---|---|---|---|---|"]
    for service, model in models.items():
        for name, field in model.model_fields.items():
            if model is not CommonSettings and name in CommonSettings.model_fields:
                continue  # listed once, under "all"
            rows.append(
                f"| {service} | `{flag_name(name)}` | `{env_name(name)}` | `{field.default}` | {field.description} |"
            )
    return "\n".join(rows)


def with_block(page: str, start: str, end: str, body: str) -> str:
    """`page` with the lines between the marker lines `start` and `end` replaced by `body`: how the generated
    tables of docs/ (configuration, limits) are written into their pages. Markers missing: ValueError."""
    before, found_start, rest = page.partition(start + "\n")
    _, found_end, after = rest.partition(end)
    if not (found_start and found_end):
        raise ValueError(f"the page has no {start!r} … {end!r} block to write the table into")
    return f"{before}{start}\n{body}\n{end}{after}"


def write_generated_pages(
    prog: str,
    description: str,
    write_help: str,
    table: Callable[[], str],
    written: Callable[[], dict[Path, str]],
    root: Path,
) -> None:
    """The command line of a generated page (`python -m deliberate.settings_table`, `… .limits_table`): without
    --write it prints the table; with it, each file whose content differs from what `written` says is rewritten."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--write", action="store_true", help=write_help)
    if not parser.parse_args().write:
        print(table())
        return
    for path, content in written().items():
        if path.read_text() != content:
            path.write_text(content)
            print(f"wrote {path.relative_to(root)}")
