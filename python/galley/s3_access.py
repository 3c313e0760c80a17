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
3. the config file (``AWS_CONFIG_FILE``, default ``~/.aws/config``), section
   ``[profile PROFILE]`` (``[default]`` for the default profile).

``PROFILE`` is ``AWS_PROFILE``, else ``AWS_DEFAULT_PROFILE``, else
``default``. Single sign-on, ``credential_process``, web identity and
instance metadata are not read: export such credentials first
(``aws configure export-credentials --format env``).

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
import os
from typing import Dict, List, Mapping, Optional, Tuple


class S3CredentialsNotFound(PermissionError):
    """No complete S3 credentials in any of the places the AWS CLI reads;
    the message names each place and what it lacked."""


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


def resolve(env: Optional[Mapping[str, str]] = None, home: Optional[str] = None,
            what: str = "the dataset") -> Dict[str, object]:
    """The job's access as OpenJob's ``s3`` field (docs/protocol.md 1.4):
    ``endpoint_url``, ``region``, ``path_style``, ``access_key_id``,
    ``secret_access_key``, ``session_token``. ``env`` defaults to
    ``os.environ`` and ``home`` to the user's home folder. Raises
    S3CredentialsNotFound naming every place looked in, and ValueError for a
    config file that cannot be parsed or a profile named but absent."""
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
    for path, parser, section in ((credentials_path, credentials_file, profile),
                                  (config_path, config_file, config_section_name)):
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
                looked.append(f"{where}: no aws_access_key_id and aws_secret_access_key")
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
    }
