"""The job's access to S3-compatible storage, resolved as the AWS CLI does.

A loader whose ``dataset=`` names ``s3://`` shards sends galleyd the
endpoint, region and credentials it resolves here, in the job's own
environment: galleyd never uses credentials of its own, so each job reads
only what its credentials may (docs/access.md, "Datasets in object
storage"). The places and their order are the AWS CLI's and boto3's:

Credentials, the first place that has both the key id and the secret:

1. the environment: ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY`` and
   ``AWS_SESSION_TOKEN`` (temporary credentials);
2. the shared credentials file (``AWS_SHARED_CREDENTIALS_FILE``, default
   ``~/.aws/credentials``), section ``[PROFILE]``;
3. the profile's ``credential_process`` (in either file's section): the
   command is run, split as a shell would split it but without a shell, and
   must print ``{"Version": 1, "AccessKeyId", "SecretAccessKey",
   "SessionToken", "Expiration"}`` (Expiration in ISO 8601; absent for
   credentials that do not expire);
4. the config file (``AWS_CONFIG_FILE``, default ``~/.aws/config``), section
   ``[profile PROFILE]`` (``[default]`` for the default profile).

This is botocore's order (its shared-credentials, process and config-file
providers). ``PROFILE`` is ``AWS_PROFILE``, else ``AWS_DEFAULT_PROFILE``,
else ``default``. Single sign-on, web identity and instance metadata are not
read: wrap them in a ``credential_process`` (``aws configure
export-credentials --format process``), or export them first.

While a job runs, galley/_s3_refresh.py resolves them again: when a
credential_process's Expiration comes near, when a file or the environment
changes, and every five minutes; docs/access.md, "Temporary credentials".

Region: ``AWS_REGION``, ``AWS_DEFAULT_REGION``, then ``region`` in the
profile's config section; default ``us-east-1``.

Endpoint: ``AWS_ENDPOINT_URL_S3``, ``AWS_ENDPOINT_URL``, then
``endpoint_url`` in the profile's nested ``s3 =`` section, then
``endpoint_url`` in the profile's section; none means AWS's own regional
endpoint. Addressing: ``addressing_style`` in the nested ``s3 =`` section
(``path``, ``virtual`` or ``auto``); ``auto`` (the default) is path style at
an endpoint of one's own (MinIO, Ceph, rclone serve s3) and virtual-host
style at AWS.

Nothing here is logged or kept: the dict goes into the job's OpenJob request.
"""

import configparser
import datetime
import json
import os
import shlex
import subprocess
from typing import Dict, List, Mapping, Optional, Tuple


class S3CredentialsNotFound(PermissionError):
    """No complete S3 credentials in any of the places the AWS CLI reads;
    the message names each place and what it lacked."""


class S3CredentialProcessError(PermissionError):
    """The profile's credential_process could not be run, failed, or printed
    something other than the AWS CLI's credential JSON (Version 1). The
    message names the profile, the file and the command, never what the
    command printed (it may hold secrets)."""


# The longest a credential_process may run before it is given up on.
CREDENTIAL_PROCESS_SECONDS = 60.0


def _read_ini(path: str) -> Optional[configparser.RawConfigParser]:
    parser = configparser.RawConfigParser(default_section="\0none")
    try:
        with open(path, encoding="utf-8") as f:
            parser.read_file(f)
    except FileNotFoundError:
        return None
    except (OSError, configparser.Error, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: cannot be read as an AWS config file: {e}") from None
    return parser


def _nested(value: str) -> Dict[str, str]:
    """The settings of a nested section (``s3 =`` followed by indented
    ``key = value`` lines)."""
    out = {}
    for line in value.splitlines():
        key, sep, item = line.partition("=")
        if sep:
            out[key.strip()] = item.strip()
    return out


def _profile_name(env: Mapping[str, str]) -> str:
    return env.get("AWS_PROFILE") or env.get("AWS_DEFAULT_PROFILE") or "default"


def _files(env: Mapping[str, str], home: Optional[str]) -> Tuple[str, str]:
    home = home if home is not None else os.path.expanduser("~")
    credentials = env.get("AWS_SHARED_CREDENTIALS_FILE") or os.path.join(home, ".aws", "credentials")
    config = env.get("AWS_CONFIG_FILE") or os.path.join(home, ".aws", "config")
    return os.path.expanduser(credentials), os.path.expanduser(config)


def _parse_expiration(text: object, where: str) -> float:
    """An ISO 8601 time (``2026-11-29T15:00:00Z``, or with an offset) as
    seconds since the epoch."""
    if not isinstance(text, str):
        raise S3CredentialProcessError(f"{where}: Expiration must be an ISO 8601 string")
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    try:
        moment = datetime.datetime.fromisoformat(value)
    except ValueError:
        raise S3CredentialProcessError(
            f"{where}: Expiration {text[:64]!r} is no ISO 8601 time "
            "(write e.g. 2026-11-29T15:00:00Z)") from None
    if moment.tzinfo is None:  # the AWS CLI reads a time without a zone as UTC
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return moment.timestamp()


def _run_credential_process(command: str, where: str, env: Mapping[str, str]
                            ) -> Tuple[Tuple[str, str, str], Optional[float]]:
    """Runs ``command`` as the AWS CLI does and reads its credentials and
    their expiry (None: they do not expire)."""
    try:
        argv = shlex.split(command)
    except ValueError as e:
        raise S3CredentialProcessError(f"{where}: the command cannot be split: {e}") from None
    if not argv:
        raise S3CredentialProcessError(f"{where}: the command is empty")
    try:
        # Its error output goes to the job's own, as with the AWS CLI (a
        # prompt or a reason); its output is read and never shown.
        done = subprocess.run(argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                              env=dict(env), timeout=CREDENTIAL_PROCESS_SECONDS, check=False)
    except subprocess.TimeoutExpired:
        raise S3CredentialProcessError(
            f"{where}: `{command}` did not finish within {CREDENTIAL_PROCESS_SECONDS:g} s") \
            from None
    except OSError as e:
        raise S3CredentialProcessError(f"{where}: `{command}` cannot be run: {e}") from None
    if done.returncode != 0:
        raise S3CredentialProcessError(
            f"{where}: `{command}` exited with status {done.returncode}; its error output, if "
            "any, is above")
    shape = ('it must print the AWS CLI\'s credential JSON: {"Version": 1, "AccessKeyId": ..., '
             '"SecretAccessKey": ..., "SessionToken": ..., "Expiration": "ISO 8601"}')
    try:
        printed = json.loads(done.stdout.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise S3CredentialProcessError(f"{where}: `{command}` printed no JSON; {shape}") from None
    if not isinstance(printed, dict):
        raise S3CredentialProcessError(f"{where}: `{command}` printed no JSON object; {shape}")
    if printed.get("Version") != 1:
        version = printed.get("Version")
        raise S3CredentialProcessError(
            f"{where}: `{command}` printed Version {str(version)[:16]!r}; galley reads "
            f"Version 1; {shape}")
    key_id, secret = printed.get("AccessKeyId"), printed.get("SecretAccessKey")
    token = printed.get("SessionToken") or ""
    if not (isinstance(key_id, str) and key_id and isinstance(secret, str) and secret
            and isinstance(token, str)):
        raise S3CredentialProcessError(
            f"{where}: `{command}` printed no AccessKeyId and SecretAccessKey strings; {shape}")
    expiration = printed.get("Expiration")
    expires = None if expiration is None else _parse_expiration(expiration,
                                                                f"{where}: `{command}`")
    return (key_id, secret, token), expires


def watched_files(env: Optional[Mapping[str, str]] = None,
                  home: Optional[str] = None) -> Tuple[str, str]:
    """The shared credentials file and the config file ``resolve`` reads."""
    return _files(os.environ if env is None else env, home)


def resolve(env: Optional[Mapping[str, str]] = None, home: Optional[str] = None,
            what: str = "the dataset") -> Dict[str, object]:
    """``resolve_timed`` without the expiry."""
    return resolve_timed(env, home, what)[0]


def resolve_timed(env: Optional[Mapping[str, str]] = None, home: Optional[str] = None,
                  what: str = "the dataset") -> Tuple[Dict[str, object], Optional[float]]:
    """The job's access as OpenJob's ``s3`` field (docs/protocol.md 1.4):
    ``endpoint_url``, ``region``, ``path_style``, ``access_key_id``,
    ``secret_access_key``, ``session_token``. ``env`` defaults to
    ``os.environ`` and ``home`` to the user's home folder. Raises
    S3CredentialsNotFound naming every place looked in,
    S3CredentialProcessError for a credential_process that fails or prints
    no credentials, and ValueError for a config file that cannot be parsed.
    Also returns when the credentials expire (seconds since the epoch), as
    their credential_process says; None when they do not."""
    env = os.environ if env is None else env
    profile = _profile_name(env)
    credentials_path, config_path = _files(env, home)
    credentials_file = _read_ini(credentials_path)
    config_file = _read_ini(config_path)
    config_section_name = "default" if profile == "default" else f"profile {profile}"
    config: Dict[str, str] = {}
    if config_file is not None and config_file.has_section(config_section_name):
        config = dict(config_file.items(config_section_name))
    elif config_file is not None and profile == "default" and config_file.has_section(
            "profile default"):
        config = dict(config_file.items("profile default"))
    s3_settings = _nested(config.get("s3", ""))

    looked: List[str] = []
    expires: Optional[float] = None
    key_id = env.get("AWS_ACCESS_KEY_ID", "")
    secret = env.get("AWS_SECRET_ACCESS_KEY", "")
    token = env.get("AWS_SESSION_TOKEN", "") or env.get("AWS_SECURITY_TOKEN", "")
    if key_id and secret:
        found: Optional[Tuple[str, str, str]] = (key_id, secret, token)
    else:
        found = None
        if key_id or secret:
            missing = "AWS_SECRET_ACCESS_KEY" if key_id else "AWS_ACCESS_KEY_ID"
            looked.append(f"the environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY: "
                          f"{missing} is not set)")
        else:
            looked.append("the environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY: "
                          "not set)")
    places = ((credentials_path, credentials_file, profile),
              (config_path, config_file, config_section_name))
    for place, (path, parser, section) in enumerate(places):
        if found is not None:
            break
        if place == 1:
            # Between the two files' keys, as botocore's process provider.
            found, expires = _process_credentials(places, env)
            if found is not None:
                break
        where = f"{path} [{section}]"
        if parser is None:
            looked.append(f"{where}: no such file")
        elif not parser.has_section(section):
            looked.append(f"{where}: no such section")
        else:
            items = dict(parser.items(section))
            key_id = items.get("aws_access_key_id", "").strip()
            secret = items.get("aws_secret_access_key", "").strip()
            if key_id and secret:
                found = (key_id, secret, items.get("aws_session_token", "").strip())
            else:
                looked.append(f"{where}: no aws_access_key_id and aws_secret_access_key"
                              + (" and no credential_process" if place == 1 else ""))
    if found is None:
        configure = "aws configure" + ("" if profile == "default" else f" --profile {profile}")
        hint = (f"set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, run `{configure}`, or set "
                "AWS_PROFILE to a profile that has them")
        raise S3CredentialsNotFound(
            f"no S3 credentials for {what} (profile {profile!r}); galley looked in: "
            + "; ".join(looked) + f". {hint}")

    region = (env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or config.get("region")
              or "us-east-1").strip()
    endpoint = (env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
                or s3_settings.get("endpoint_url") or config.get("endpoint_url") or "").strip()
    style = s3_settings.get("addressing_style", "auto").strip().lower()
    if style not in ("auto", "path", "virtual"):
        raise ValueError(f"{config_path} [{config_section_name}]: s3 addressing_style must be "
                         f"path, virtual or auto, not {style!r}")
    path_style = style == "path" or (style == "auto" and bool(endpoint))
    return {
        "endpoint_url": endpoint.rstrip("/"),
        "region": region,
        "path_style": path_style,
        "access_key_id": found[0],
        "secret_access_key": found[1],
        "session_token": found[2],
    }, expires


def _process_credentials(places, env: Mapping[str, str]
                         ) -> Tuple[Optional[Tuple[str, str, str]], Optional[float]]:
    """The credentials of the profile's credential_process, the config
    file's section first; (None, None) when neither section sets one."""
    for path, parser, section in reversed(places):
        if parser is None or not parser.has_section(section):
            continue
        command = dict(parser.items(section)).get("credential_process", "").strip()
        if command:
            return _run_credential_process(command, f"credential_process of {path} [{section}]",
                                           env)
    return None, None
